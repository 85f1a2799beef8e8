// Package normalize turns what a model returned into a task's typed result, or says precisely
// why it cannot (shared/DESIGN.md §5). Between the model and the business logic it is where a
// backup model becomes usable: its JSON wrapped in Markdown, after "Вот ваш ответ:", with
// `категория` for `category`, "0,8" for 0.8 or a missing closing brace is recovered, and an
// answer to another question is refused with reasons a person and a model can read.
//
// A Contract is a task's JSON Schema, compiled once (with the task's synonyms); it is
// immutable and safe for concurrent use. Normalize runs the pipeline, in the design's order:
//
//  1. locate the JSON in the text: code fences (tagged or not, several, unclosed), preamble
//     and trailing prose in any language, a byte-order mark, a JSON string around it;
//  2. repair it when it does not parse (github.com/kaptinlin/jsonrepair: trailing commas,
//     single and typographic quotes, unquoted keys, comments, Python literals, missing
//     closers), never merging several values into one, and never making up the end of a
//     value a truncated answer was cut inside;
//  3. rename keys by the synonyms and by case, accent, underscore, hyphen and camelCase
//     variants of the schema's property names;
//  4. coerce scalars where the schema is unambiguous ("0.8" → 0.8, "да" → true; not
//     "1,000" or "2.500", where the separator may group thousands);
//  5. validate against the schema (github.com/santhosh-tekuri/jsonschema). Nothing is
//     dropped, merged or overwritten to make an answer fit: an object with a key twice
//     (as written, or once renamed) is refused.
//
// Rename and coerce only touch an answer that does not fit as it is, so valid JSON that fits
// comes out byte for byte.
//
// NormalizeAnswer takes the provider's finish reason too, which decides what becomes of a
// JSON that never closes: one the model ended by itself ("stop") that only lacks its closers
// is completed, even right after a number; one the token limit cut ("length") is refused at
// StageTruncated, to be re-asked for a shorter answer. Normalize is NormalizeAnswer with the
// finish reason unknown, where a number at the end may be cut and is not completed.
//
//	c, err := normalize.Compile("triage", schemaJSON, normalize.WithSynonyms(map[string][]string{
//		"department": {"категория", "departamento"},
//	}))
//	out := c.NormalizeAnswer(resp.Content, resp.FinishReason)
//	if out.Err != nil {
//		// out.Err.Stage is "extract", "repair", "truncated" or "schema"; out.Err.Details
//		// the reasons, which ReaskText quotes back to the model.
//	}
//	use(out.Value)  // JSON that fits the schema
//	out.Steps       // the steps that changed the text, for afloat_normalize_total{step}
//
// Check is Normalize for callers that want (value, error). CheckToolCalls validates a
// response's tool-call arguments against their tools' parameter schemas the same way.
//
// Fixtures are recorded outputs of a model for a prompt, with their finish reason when it
// matters, and the expected result or rejection (see Fixture for the two-file format);
// RunFixture checks one, and `afloat prompts test` runs those beside every template of a
// config. The package's own corpus, testdata/corpus, holds 148 of them, in Russian,
// Portuguese and English.
package normalize
