// Package normalize turns what a model returned into a task's typed result, or says precisely
// why it cannot (shared/DESIGN.md §5).
//
// A Contract is a task's JSON Schema, compiled once. Check locates the JSON value in a model's
// text (code fences and surrounding prose dropped) and validates it:
//
//	c, err := normalize.Compile("triage", schemaJSON)
//	out, err := c.Check(modelText) // err is an *afloat.ContractError with its stage
//
// This is the minimal pipeline (locate, decode, validate); repair, synonyms and coercion
// extend it.
package normalize
