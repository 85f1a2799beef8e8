// Command tickets is the ticket service of afloat's seeds: POST /tickets stores a support
// ticket and answers 201 with it and its triage evaluation, computed by a model through
// afloat in-process. When the model is down, the ticket is still stored and evaluated, by
// the task's heuristic rules, and the evaluation says so (source, degraded); GET
// /tickets/{id}, which needs no AI, never waits for the model.
//
//	go run ./examples/tickets                       # a simulated model
//	go run ./examples/tickets -upstream http://127.0.0.1:8000/v1 -model t-lite   # vLLM, llama.cpp, Ollama
package main
