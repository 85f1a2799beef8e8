package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Load reads and checks the config file at path, with ${VAR} expanded from the process's
// environment and relative paths resolved against the file's folder. A file that cannot be
// read is returned as is; every problem in a file that can is returned at once, as Errors.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return Parse(data, dir, os.LookupEnv)
}

// Parse reads and checks a config file's text. dir is the folder relative paths are resolved
// against ("" means the working directory); env looks up the variables of ${VAR} (nil means
// os.LookupEnv). Every problem found is returned at once, as Errors in the order of their
// lines.
func Parse(data []byte, dir string, env func(string) (string, bool)) (*File, error) {
	f, errs := parse(data, dir, env)
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// parse is Parse that also returns the File it could read despite errors (nil when the text
// is not YAML), for Check to go on with.
func parse(data []byte, dir string, env func(string) (string, bool)) (f *File, errs Errors) {
	if env == nil {
		env = os.LookupEnv
	}
	defer func() {
		// The YAML parser is a dependency: a panic on hostile input must not take the
		// gateway's start-up or `afloat check` down with a stack trace.
		if r := recover(); r != nil {
			f, errs = nil, Errors{{Msg: fmt.Sprintf("yaml: parser failed: %v", r)}}
		}
	}()
	text := data
	data, masks := maskEnv(data)
	// Duplicate keys are left to the decoder, which reports them with their path and goes on.
	tree, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, Errors{syntaxError(err)}
	}
	var bodies []ast.Node
	for _, doc := range tree.Docs {
		if doc != nil && doc.Body != nil {
			bodies = append(bodies, doc.Body)
		}
	}
	if len(bodies) > 1 {
		return nil, Errors{{Line: lineOf(bodies[1]), Msg: "a config file holds one YAML document"}}
	}
	d := &decoder{env: env, anchors: map[string]ast.Node{}, lines: map[string]int{}, masks: masks}
	f = &File{Dir: dir}
	if len(bodies) == 1 {
		d.collectAnchors(bodies[0])
		d.decode(bodies[0], reflect.ValueOf(f).Elem(), "")
	}
	f.lines = d.lines
	v := &validator{f: f, errs: d.errs}
	v.validate()
	f.invalid = invalidEntities(f, v.errs)
	f.stamp(text)
	return f, v.errs.sorted()
}

func syntaxError(err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		line := 0
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			line = tk.Position.Line
		}
		return &Error{Line: line, Msg: "yaml: " + ye.GetMessage()}
	}
	return &Error{Msg: "yaml: " + err.Error()}
}

// invalidEntities returns the providers, tasks and routes that some error is about.
func invalidEntities(f *File, errs Errors) map[string]bool {
	out := map[string]bool{}
	mark := func(prefix string) {
		for _, e := range errs {
			if e.Path == prefix || strings.HasPrefix(e.Path, prefix+".") || strings.HasPrefix(e.Path, prefix+"[") {
				out[prefix] = true
				return
			}
		}
	}
	for _, p := range f.Providers {
		mark("providers." + p.Name)
	}
	for _, t := range f.Tasks {
		mark("tasks." + t.Name)
	}
	for _, r := range f.Routes {
		mark("routes." + r.Name)
	}
	return out
}
