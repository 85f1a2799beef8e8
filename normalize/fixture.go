package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// A fixture is one recorded output of a model for a prompt, with what the pipeline must make
// of it. It is two files side by side in a folder:
//
//	NAME.out    the model's output, byte for byte (as it came, fences and prose included)
//	NAME.want   the expectation
//
// A .want file starts with header lines, "key: value", and blank or "#" comment lines:
//
//	reject: STAGE   the answer must be refused at STAGE (extract, repair, truncated or
//	                schema)
//	detail: TEXT    (repeatable) with a rejection: some detail must contain TEXT
//	finish: REASON  the provider's finish reason with the answer (stop, length, tool_calls
//	                or content_filter; see Contract.NormalizeAnswer); absent means unknown
//	steps: LIST     the steps that must have changed the answer, exactly ("locate repair",
//	                "none"); absent means not checked
//	lang: CODE      the answer's language (en, ru, pt), for the record
//	note: TEXT      what the case is about, printed when it fails
//
// An accepted case (no reject) then holds the expected result, a JSON value on the lines
// after the header, compared as JSON: key order, white space and the spelling of numbers
// (0.80 and 0.8) aside.
//
// The fixtures of a prompt template live in the folder beside it that FixtureDir names:
// prompts/triage/gigachat-pro.v3.tmpl has prompts/triage/gigachat-pro.v3.fixtures/.
type Fixture struct {
	// Name is the files' shared base name.
	Name string
	// Output is the model's output.
	Output string
	// Reject is the stage the answer must be refused at; "" means it must be accepted.
	Reject string
	// Details are texts that some detail of the rejection must contain.
	Details []string
	// Finish is the provider's finish reason with the output; "" means unknown.
	Finish string
	// Want is the expected result of an accepted case.
	Want json.RawMessage
	// Steps are the steps that must have changed the answer, when CheckSteps.
	Steps      Steps
	CheckSteps bool
	// Lang and Note are for the record.
	Lang, Note string
}

// FixtureDir returns the fixtures folder of a prompt template: its path with ".tmpl"
// replaced by ".fixtures".
func FixtureDir(template string) string {
	return strings.TrimSuffix(template, ".tmpl") + ".fixtures"
}

// LoadFixtures reads every fixture of dir, sorted by name. A folder that does not exist is
// an error wrapping fs.ErrNotExist; an .out without its .want (or the reverse) and a .want
// that does not parse are errors naming the file.
func LoadFixtures(dir string) ([]Fixture, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	outs, wants := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if name, ok := strings.CutSuffix(e.Name(), ".out"); ok {
			outs[name] = true
		}
		if name, ok := strings.CutSuffix(e.Name(), ".want"); ok {
			wants[name] = true
		}
	}
	var names []string
	for name := range outs {
		if !wants[name] {
			return nil, fmt.Errorf("fixture %s: %s.want is missing", filepath.Join(dir, name+".out"), name)
		}
		names = append(names, name)
	}
	for name := range wants {
		if !outs[name] {
			return nil, fmt.Errorf("fixture %s: %s.out is missing", filepath.Join(dir, name+".want"), name)
		}
	}
	slices.Sort(names)
	out := make([]Fixture, 0, len(names))
	for _, name := range names {
		output, err := os.ReadFile(filepath.Join(dir, name+".out"))
		if err != nil {
			return nil, err
		}
		want, err := os.ReadFile(filepath.Join(dir, name+".want"))
		if err != nil {
			return nil, err
		}
		f, err := ParseFixture(name, string(output), string(want))
		if err != nil {
			return nil, fmt.Errorf("fixture %s: %w", filepath.Join(dir, name+".want"), err)
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseFixture builds a fixture from the texts of its two files.
func ParseFixture(name, output, want string) (Fixture, error) {
	f := Fixture{Name: name, Output: output}
	lines := strings.SplitAfter(want, "\n")
	body := ""
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, "\"") ||
			t == "null" || t == "true" || t == "false" || (t[0] >= '0' && t[0] <= '9') || t[0] == '-' {
			body = strings.Join(lines[i:], "")
			break
		}
		key, val, ok := strings.Cut(t, ":")
		if !ok {
			return f, fmt.Errorf("line %d: want a header line \"key: value\" or the expected JSON, got %q", i+1, t)
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "reject":
			switch val {
			case StageExtract, StageRepair, StageTruncated, StageSchema:
				f.Reject = val
			default:
				return f, fmt.Errorf("line %d: unknown stage %q (want extract, repair, truncated or schema)", i+1, val)
			}
		case "finish":
			switch val {
			case "stop", "length", "tool_calls", "content_filter":
				f.Finish = val
			default:
				return f, fmt.Errorf("line %d: unknown finish reason %q (want stop, length, tool_calls or content_filter)", i+1, val)
			}
		case "detail":
			f.Details = append(f.Details, val)
		case "steps":
			s, err := ParseSteps(val)
			if err != nil {
				return f, fmt.Errorf("line %d: %w", i+1, err)
			}
			f.Steps, f.CheckSteps = s, true
		case "lang":
			f.Lang = val
		case "note":
			f.Note = val
		default:
			return f, fmt.Errorf("line %d: unknown key %q (want reject, detail, finish, steps, lang or note)", i+1, key)
		}
	}
	switch {
	case f.Reject == "" && body == "":
		return f, errors.New("an accepted case needs its expected result (or reject: STAGE)")
	case f.Reject != "" && body != "":
		return f, errors.New("a rejected case has no expected result")
	case f.Reject == "" && len(f.Details) > 0:
		return f, errors.New("detail: goes with reject:")
	}
	if body != "" {
		if !json.Valid([]byte(body)) {
			return f, errors.New("the expected result is not valid JSON")
		}
		if dup := duplicateKey(body); dup != "" {
			return f, fmt.Errorf("the expected result has a duplicate key: %s", dup)
		}
		f.Want = json.RawMessage(strings.TrimSpace(body))
	}
	return f, nil
}

// FixtureResult is one fixture run through a contract.
type FixtureResult struct {
	Fixture Fixture
	Outcome Outcome
	// Pass says whether the outcome is the expected one.
	Pass bool
	// Problem says how it differs when it does not pass.
	Problem string
}

// Stage returns the stage the answer was refused at, or "".
func (r FixtureResult) Stage() string {
	if r.Outcome.Err == nil {
		return ""
	}
	return r.Outcome.Err.Stage
}

// RunFixture runs a fixture's output through the pipeline, with its finish reason, and
// compares the outcome with the expectation. A wrong accept (a result where a rejection was
// expected) never passes.
func (c *Contract) RunFixture(f Fixture) FixtureResult {
	out := c.NormalizeAnswer(f.Output, f.Finish)
	r := FixtureResult{Fixture: f, Outcome: out}
	r.Problem = f.problem(out)
	r.Pass = r.Problem == ""
	return r
}

func (f Fixture) problem(out Outcome) string {
	if f.Reject != "" {
		if out.Err == nil {
			return fmt.Sprintf("accepted as %s, want a rejection at %s", out.Value, f.Reject)
		}
		if out.Err.Stage != f.Reject {
			return fmt.Sprintf("rejected at %s, want at %s: %s", out.Err.Stage, f.Reject, strings.Join(out.Err.Details, "; "))
		}
		for _, d := range f.Details {
			if !slices.ContainsFunc(out.Err.Details, func(s string) bool { return strings.Contains(s, d) }) {
				return fmt.Sprintf("no detail contains %q: %s", d, strings.Join(out.Err.Details, "; "))
			}
		}
	} else {
		if out.Err != nil {
			return fmt.Sprintf("rejected at %s: %s", out.Err.Stage, strings.Join(out.Err.Details, "; "))
		}
		same, err := sameJSON(out.Value, f.Want)
		if err != nil {
			return err.Error()
		}
		if !same {
			return fmt.Sprintf("result %s, want %s", out.Value, f.Want)
		}
	}
	if f.CheckSteps && out.Steps != f.Steps {
		return fmt.Sprintf("steps %s, want %s", out.Steps, f.Steps)
	}
	return ""
}

// sameJSON compares two JSON texts as values: numbers by value, key order aside. A text
// with a duplicate key is an error, not a value: decoding would keep one of the two.
func sameJSON(a, b []byte) (bool, error) {
	if dup := duplicateKey(string(a)); dup != "" {
		return false, fmt.Errorf("result %s: %s", a, dup)
	}
	if dup := duplicateKey(string(b)); dup != "" {
		return false, fmt.Errorf("expected %s: %s", b, dup)
	}
	var va, vb any
	if err := json.NewDecoder(bytes.NewReader(a)).Decode(&va); err != nil {
		return false, fmt.Errorf("result %s: %w", a, err)
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&vb); err != nil {
		return false, fmt.Errorf("expected %s: %w", b, err)
	}
	return reflect.DeepEqual(va, vb), nil
}
