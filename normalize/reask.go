package normalize

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/afloat-dev/afloat"
)

// ReaskText returns the clarifying message of a re-ask (shared/DESIGN.md §2, step 6): what is
// wrong with the previous answer, line by line from the error's details, and the JSON Schema
// the answer must fit. An answer refused at StageTruncated is told instead that it was cut
// off by the length limit, and asked for one complete, shorter JSON object. It is written for
// the model:
// the cascade appends it, as a user message, to the same conversation after the model's own
// answer.
func ReaskText(err error, schema json.RawMessage) string {
	var b strings.Builder
	if stageOf(err) == StageTruncated {
		// The detail only restates it: the model needs to know why, and to write less.
		b.WriteString("Your previous answer was cut off by the length limit before its JSON ended.\n")
		b.WriteString("Answer again with one complete, shorter JSON object and nothing else (no prose, no Markdown, no explanation), valid against this JSON Schema:\n")
		b.Write(schema)
		return b.String()
	}
	b.WriteString("Your previous answer does not fit the required format.\n")
	if lines := problems(err); len(lines) > 0 {
		b.WriteString("Problems:\n")
		for _, d := range lines {
			b.WriteString("- " + d + "\n")
		}
	}
	b.WriteString("Answer again with exactly one JSON object and nothing else (no Markdown, no explanation), valid against this JSON Schema:\n")
	b.Write(schema)
	return b.String()
}

// ReaskData returns the data a re-ask template (a per-tier override of ReaskText) renders
// with, under the names ReaskFields lists:
//
//	errors  []string  the problems, the error's details (as ReaskText lists them but for
//	                  truncated, where the stage says it all)
//	stage   string    extract, repair, truncated (cut by the length limit: ask for a
//	                  complete, shorter answer) or schema; "" when err is no ContractError
//	schema  string    the JSON Schema the answer must fit
//	answer  string    the model's previous answer, as it came
func ReaskData(err error, schema json.RawMessage, answer string) map[string]any {
	return map[string]any{"errors": problems(err), "stage": stageOf(err), "schema": string(schema), "answer": answer}
}

// stageOf returns the stage of a contract error, or "".
func stageOf(err error) string {
	var ce *afloat.ContractError
	if errors.As(err, &ce) {
		return ce.Stage
	}
	return ""
}

// ReaskFields returns the names ReaskData sets, sorted: a re-ask template may read no other.
func ReaskFields() []string { return []string{"answer", "errors", "schema", "stage"} }

func problems(err error) []string {
	if err == nil {
		return nil
	}
	var ce *afloat.ContractError
	if errors.As(err, &ce) && len(ce.Details) > 0 {
		return ce.Details
	}
	return []string{err.Error()}
}

// ToolReaskText returns the answer of a re-ask to a tool call whose arguments do not fit the
// tool's parameters: the problems, and the parameters' JSON Schema. The cascade sends it as
// the tool message of that call, so that the model calls again.
func ToolReaskText(err error, tool string, schema json.RawMessage) string {
	var b strings.Builder
	b.WriteString("This call of " + tool + " was not made: its arguments do not fit the tool's parameters.\n")
	if lines := problems(err); len(lines) > 0 {
		b.WriteString("Problems:\n")
		for _, d := range lines {
			b.WriteString("- " + d + "\n")
		}
	}
	b.WriteString("Call the tool again with arguments valid against this JSON Schema:\n")
	b.Write(schema)
	return b.String()
}
