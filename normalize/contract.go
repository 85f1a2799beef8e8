package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	neturl "net/url"
	"slices"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Contract is a task's output schema, compiled once, with what the pipeline derives from it
// (the property names and types that rename and coerce read). Make one with Compile: the zero
// Contract is not usable. It is immutable and safe for concurrent use.
type Contract struct {
	name   string
	raw    json.RawMessage
	schema *jsonschema.Schema
	shape  *shape
}

// Option configures Compile.
type Option func(*options)

type options struct {
	synonyms map[string][]string
	client   bool
}

// WithSynonyms gives, per property of the schema, the other words a model may use for it
// ({"department": ["категория", "category", "dept"]}). A synonym is matched like the
// property's own name: case, accents, underscores, hyphens and camelCase aside. A property
// the schema does not have is an error of Compile. nil means none.
func WithSynonyms(synonyms map[string][]string) Option {
	return func(o *options) { o.synonyms = synonyms }
}

// Compile compiles a JSON Schema (draft 2020-12 unless it says otherwise). name appears in
// errors. A $ref to anything but the schema itself is an error, never a read: schemas may
// come from clients (a chat request's response_format). A client's schema is compiled with
// FromClient, which bounds the work of compiling it and of validating an answer against it.
func Compile(name string, schema []byte, opts ...Option) (*Contract, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.client {
		if err := checkNesting(schema); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	if o.client {
		if err := new(rawWalk).schema(doc, 0); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "afloat:///" + neturl.PathEscape(name) + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	if o.client {
		if err := newExpansion().walk(sch, ""); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	sh := buildShape(sch, map[*jsonschema.Schema]*shape{})
	known := indexNames(sh, o.synonyms)
	if err := checkSynonyms(name, o.synonyms, known); err != nil {
		return nil, err
	}
	return &Contract{name: name, raw: slices.Clip(json.RawMessage(schema)), schema: sch, shape: sh}, nil
}

// Name returns the name the contract was compiled with.
func (c *Contract) Name() string { return c.name }

// Schema returns the schema's source.
func (c *Contract) Schema() json.RawMessage { return c.raw }

// Check runs the pipeline (see Normalize) and returns the normalized value, or the
// *afloat.ContractError that says why there is none.
func (c *Contract) Check(text string) (json.RawMessage, error) {
	out := c.Normalize(text)
	if out.Err != nil {
		return nil, out.Err
	}
	return out.Value, nil
}

// Validate checks an already decoded JSON document (as encoding/json encodes a value of the
// caller's type, or as an operator wrote it) against the schema, as it is: no step of the
// pipeline runs. An object that holds a key twice is refused at StageSchema, as Normalize
// refuses it.
func (c *Contract) Validate(doc json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &afloat.ContractError{Stage: StageRepair, Details: []string{err.Error()}, Err: err}
	}
	if dup := duplicateKey(string(doc)); dup != "" {
		return &afloat.ContractError{Stage: StageSchema, Details: []string{dup}, Err: errors.New(dup)}
	}
	if verr := c.validate(v); verr != nil {
		return verr
	}
	return nil
}

// ValidateValue checks a value against the schema as Validate checks its JSON encoding. A
// value of JSON's own types (what encoding/json decodes into an any: strings, float64 and
// json.Number, bools, nil, []any, map[string]any) is checked as it is, without encoding it
// and decoding it again (three passes over an 8 KiB ticket otherwise: the validator reads a
// float64 as the shortest decimal that encodes it, as it would read the encoding); any other
// Go value is encoded first. A Go map holds no key twice: there is no duplicate to refuse.
func (c *Contract) ValidateValue(v any) error {
	if !isJSON(v) {
		b, err := json.Marshal(v)
		if err != nil {
			return &afloat.ContractError{Stage: StageRepair, Details: []string{err.Error()}, Err: err}
		}
		return c.Validate(b)
	}
	if verr := c.validate(v); verr != nil {
		return verr
	}
	return nil
}

// isJSON reports whether v holds JSON's own types only, and no float JSON cannot hold (NaN,
// an infinity: json.Marshal refuses them).
func isJSON(v any) bool {
	switch v := v.(type) {
	case nil, string, bool, json.Number:
		return true
	case float64:
		return !math.IsNaN(v) && !math.IsInf(v, 0)
	case []any:
		for _, e := range v {
			if !isJSON(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if !isJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

func (c *Contract) validate(v any) *afloat.ContractError {
	err := c.schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &afloat.ContractError{Stage: StageSchema, Details: []string{err.Error()}, Err: err}
	}
	return &afloat.ContractError{Stage: StageSchema, Details: Details(ve), Err: err}
}

// The stages at which an answer is lost, as afloat.ContractError.Stage and the stage label of
// afloat_contract_violations_total name them.
const (
	// StageExtract: the answer holds no JSON object or array.
	StageExtract = "extract"
	// StageRepair: the JSON found does not parse, even repaired, or it is cut off in the
	// middle of a value, whose end repair would have to make up.
	StageRepair = "repair"
	// StageSchema: valid JSON that does not fit the schema, even renamed and coerced, or
	// that gives a key twice in one object (also once renamed).
	StageSchema = "schema"
	// StageTruncated: the provider cut the answer at its limit on tokens (finish reason
	// length) before the JSON ended: the span never closes, so fields may be missing and its
	// last value may be cut, and nothing is completed.
	StageTruncated = "truncated"
)

// Outcome is what the pipeline made of one answer.
type Outcome struct {
	// Value is the normalized JSON, valid against the schema; nil when Err is set. It is the
	// located span itself when neither rename nor coerce changed anything (so valid JSON
	// that fits the schema comes out byte for byte), else the value encoded anew, with the
	// keys of each object sorted.
	Value json.RawMessage
	// Steps are the steps that changed the text, failed answers included.
	Steps Steps
	// Err says why there is no value: its Stage is StageExtract, StageRepair, StageTruncated
	// or StageSchema, its Details readable lines fit to show a person and to quote back to
	// the model.
	Err *afloat.ContractError
}

// Normalize is NormalizeAnswer with the finish reason unknown: NormalizeAnswer(text, "").
func (c *Contract) Normalize(text string) Outcome { return c.NormalizeAnswer(text, "") }

// NormalizeAnswer turns a model's text into the contract's value, in the order of
// shared/DESIGN.md §5: locate the JSON in it (code fences, preamble and trailing prose dropped;
// a JSON string that holds JSON is unwrapped first), repair it when it does not parse
// (trailing commas, single and typographic quotes, unquoted keys, comments, Python literals,
// missing closers; only the first value counts: several are never merged), and validate it.
//
// finishReason is the provider's, in OpenAI's words (afloat.Response.FinishReason): it
// decides what becomes of a JSON that never closes. With "stop" or "tool_calls" the model
// ended the answer by itself, and one that only lacks its closers after a complete value (a
// closed string, object or array, true, false or null, a whole number such as "0.3", or a
// comma after one) is completed. With "length" the provider cut it at its limit on tokens:
// it is refused at StageTruncated (a JSON that closes, with text after it cut, is handled as
// usual). With "" (unknown) or any other word, "content_filter" among them, it is completed
// as with stop, except after a number at the very end, which is refused at StageRepair
// ("0.9" may have been "0.95"). Whatever the finish reason, a JSON cut inside a string, a
// literal or a number ("0."), or after a key without its value, is never completed (at
// StageRepair, or StageTruncated with length): repair would make up its end.
//
// An object that holds a key twice is refused at StageSchema, before and after repair: no
// value is chosen over the other. A value that does not fit as it is has its keys renamed
// (see WithSynonyms and fold) and its scalars coerced where the schema is unambiguous (see
// coerce), and is validated again: nothing is dropped, merged or overwritten to make it fit,
// so an extra field where the schema forbids extras stays a violation, and two keys that name
// one property ("department" and "категория") are refused as a duplicate.
func (c *Contract) NormalizeAnswer(text, finishReason string) Outcome {
	var out Outcome
	trimmed := strings.TrimSpace(text)
	if inner, ok := unquote(trimmed); ok {
		text, trimmed = inner, inner
		out.Steps |= StepLocate
	}
	span, ok := Locate(text)
	if !ok {
		out.Err = &afloat.ContractError{Stage: StageExtract, Details: []string{"the answer holds no JSON object or array"}}
		return out
	}
	if span != trimmed {
		out.Steps |= StepLocate
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(span))
	if err != nil {
		if finishReason == "length" {
			if cut := cutByLimit(span); cut != "" {
				out.Err = &afloat.ContractError{Stage: StageTruncated, Details: []string{cut}, Err: errors.New(cut)}
				return out
			}
		}
		ended := finishReason == "stop" || finishReason == "tool_calls"
		if cut := truncation(span, ended); cut != "" {
			out.Err = &afloat.ContractError{Stage: StageRepair, Details: []string{cut}, Err: errors.New(cut)}
			return out
		}
		repaired, rerr := repair(span)
		if rerr == nil {
			v, rerr = jsonschema.UnmarshalJSON(strings.NewReader(repaired))
		}
		if rerr != nil {
			out.Err = &afloat.ContractError{Stage: StageRepair,
				Details: []string{"the JSON does not parse and cannot be repaired: " + rerr.Error()}, Err: rerr}
			return out
		}
		span = repaired
		out.Steps |= StepRepair
	}
	if dup := duplicateKey(span); dup != "" {
		out.Err = &afloat.ContractError{Stage: StageSchema, Details: []string{dup}, Err: errors.New(dup)}
		return out
	}
	verr := c.validate(v)
	if verr == nil {
		out.Value = json.RawMessage(span)
		return out
	}
	var t transformer
	v = t.value(v, c.shape)
	if t.renamed {
		out.Steps |= StepRename
	}
	if t.coerced {
		out.Steps |= StepCoerce
	}
	if len(t.dups) > 0 {
		slices.Sort(t.dups)
		out.Err = &afloat.ContractError{Stage: StageSchema, Details: t.dups, Err: errors.New(strings.Join(t.dups, "; "))}
		return out
	}
	if !t.renamed && !t.coerced {
		out.Err = verr
		return out
	}
	if verr = c.validate(v); verr != nil {
		out.Err = verr
		return out
	}
	b, err := encode(v)
	if err != nil {
		out.Err = &afloat.ContractError{Stage: StageRepair, Details: []string{err.Error()}, Err: err}
		return out
	}
	out.Value = b
	return out
}

// unquote returns the text a JSON string holds when s is one whose text is JSON (a model
// that encoded its answer twice).
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' {
		return "", false
	}
	var inner string
	if json.Unmarshal([]byte(s), &inner) != nil {
		return "", false
	}
	inner = strings.TrimSpace(inner)
	if inner == "" || (inner[0] != '{' && inner[0] != '[') {
		return "", false
	}
	return inner, true
}

// encode writes a decoded value as compact JSON, keys sorted, without HTML escaping.
func encode(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Steps is a set of the pipeline's steps that changed an answer.
type Steps uint8

// The steps, in the pipeline's order; each is counted in afloat_normalize_total{step} when it
// changed something.
const (
	// StepLocate dropped text around the JSON: a code fence, a preamble, trailing prose, a
	// byte-order mark, or the quotes of a JSON string around it.
	StepLocate Steps = 1 << iota
	// StepRepair made the JSON parse.
	StepRepair
	// StepRename renamed keys to the schema's property names.
	StepRename
	// StepCoerce converted scalars to the types the schema admits.
	StepCoerce
)

// NumSteps is the number of steps: Steps(1<<i) for i in [0, NumSteps) is each one.
const NumSteps = 4

// Has reports whether s holds every step of x.
func (s Steps) Has(x Steps) bool { return s&x == x }

// String names the steps in order, joined by "+" ("locate+repair"), or "none".
func (s Steps) String() string {
	var names []string
	for i := range NumSteps {
		if s&(1<<i) != 0 {
			names = append(names, [NumSteps]string{"locate", "repair", "rename", "coerce"}[i])
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "+")
}

// ParseSteps reads a list of step names ("locate repair", "locate+repair", "none").
func ParseSteps(s string) (Steps, error) {
	var out Steps
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ' ' || r == ',' }) {
		found := false
		for i := range NumSteps {
			if Steps(1<<i).String() == name {
				out |= 1 << i
				found = true
			}
		}
		if !found && name != "none" {
			return 0, fmt.Errorf("unknown step %q (want locate, repair, rename, coerce or none)", name)
		}
	}
	return out, nil
}
