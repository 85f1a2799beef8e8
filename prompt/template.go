package prompt

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"text/template"

	"github.com/afloat-dev/afloat"
)

// Template is a parsed prompt template: the messages it renders, in order. It is immutable
// after Parse and safe for concurrent use.
type Template struct {
	name     string
	version  string
	messages []message
	fields   []string // sorted, unique
	sizeHint int      // bytes of static text, to size the render buffer once
}

// message is one role marker and the template of the text under it, in two builds: tmpl
// prints nil as "" (see prepare); plain is text/template's own, cheaper to execute, used
// when the input holds only non-nil scalars, for which both print the same.
type message struct {
	role  string
	tmpl  *template.Template
	plain *template.Template
}

// Parse parses text, the source of the template named name. The name is the file's name or
// path: it gives the version (see [Version]) and is quoted in errors. Parse fails on text other
// than blank lines before the first role marker, on a marker with an unknown role, on a
// template without a user message, on a call to an undefined template and on any
// text/template syntax error; each error names the file and the line.
func Parse(name, text string) (*Template, error) {
	sections, err := split(name, text)
	if err != nil {
		return nil, err
	}
	t := &Template{name: name, version: Version(name), messages: make([]message, 0, len(sections))}
	hasUser := false
	seen := make(map[string]struct{})
	for _, s := range sections {
		tmpl, err := template.New(name).
			Option("missingkey=error").
			Funcs(funcs()).
			Parse(s.source())
		if err != nil {
			return nil, templateError(name, err)
		}
		// A second parse, not Clone: a clone shares the parse trees that prepare edits.
		plain, err := template.New(name).Option("missingkey=error").Funcs(funcs()).Parse(s.source())
		if err != nil {
			return nil, templateError(name, err)
		}
		if err := prepare(tmpl); err != nil {
			return nil, err
		}
		collectFields(tmpl, seen)
		t.messages = append(t.messages, message{role: s.role, tmpl: tmpl, plain: plain})
		t.sizeHint = max(t.sizeHint, len(s.text))
		hasUser = hasUser || s.role == afloat.RoleUser
	}
	if !hasUser {
		return nil, fmt.Errorf("prompt %s: no user message", name)
	}
	for f := range seen {
		t.fields = append(t.fields, f)
	}
	slices.Sort(t.fields)
	return t, nil
}

// ParseFile reads the file at path and parses it with path as its name.
func ParseFile(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	return Parse(path, string(b))
}

// Name returns the name the template was parsed with.
func (t *Template) Name() string { return t.name }

// Version returns the version carried by the template's name ("v3"), or "" when the name
// carries none.
func (t *Template) Version() string { return t.version }

// Fields returns the input fields the template reads, sorted: the top-level keys of the input,
// taken from the parse trees ({{.customer.name}} reads "customer"). A field read relative to a
// dot that range or with has moved ({{range .items}}{{.name}}{{end}}) is the element's, not the
// input's, and is left out; so is a field read through a variable other than $. Render requires
// every one of them.
func (t *Template) Fields() []string { return slices.Clone(t.fields) }

// Render executes the template on in and returns its messages, one per role marker, in order,
// each with its content trimmed of surrounding white space. A field of [Template.Fields] absent
// from in is a *MissingInputError; a present field whose value is nil renders as "". Any other
// failure while executing (a field of a value that has none, a function's error) is an error
// naming the file, the line and the column.
func (t *Template) Render(in map[string]any) ([]afloat.Message, error) {
	for _, f := range t.fields {
		if _, ok := in[f]; !ok {
			return nil, &MissingInputError{Template: t.name, Field: f}
		}
	}
	scalars := onlyScalars(in)
	var buf bytes.Buffer
	buf.Grow(t.sizeHint + 256)
	msgs := make([]afloat.Message, len(t.messages))
	for i, m := range t.messages {
		buf.Reset()
		tmpl := m.tmpl
		if scalars {
			tmpl = m.plain
		}
		if err := tmpl.Execute(&buf, in); err != nil {
			return nil, templateError(t.name, err)
		}
		msgs[i] = afloat.Message{Role: m.role, Content: string(bytes.TrimSpace(buf.Bytes()))}
	}
	return msgs, nil
}

// onlyScalars reports whether every value of in is a non-nil string, number or boolean: then
// text/template prints each as printText would, and the plain build can be executed.
func onlyScalars(in map[string]any) bool {
	for _, v := range in {
		switch v.(type) {
		case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		default:
			return false
		}
	}
	return true
}
