package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

// printFunc names the function that prepare appends to every printing action. The name
// is an identifier, as text/template requires, that no prompt has a reason to call.
const printFunc = "_print"

// funcs returns the functions a template may call besides text/template's own.
func funcs() template.FuncMap {
	return template.FuncMap{
		"json":    jsonText,
		printFunc: printText,
	}
}

// jsonText renders v as compact JSON, without escaping <, > and &, which a model reads as
// they are.
func jsonText(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// printText renders the value of an action as text/template would, except that nil, a nil
// pointer included, renders as "" where text/template writes "<no value>" or "<nil>".
func printText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case error, fmt.Stringer:
		return fmt.Sprint(v)
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
		if s, ok := rv.Interface().(fmt.Stringer); ok {
			return s.String()
		}
	}
	return fmt.Sprint(rv.Interface())
}

// prepare readies a freshly parsed message template: it appends "| _print" to every action
// that prints (so that nil renders as ""), and checks that every {{template}} names a
// template defined in the same message.
func prepare(set *template.Template) error {
	for _, t := range set.Templates() {
		if t.Tree == nil {
			continue
		}
		var err error
		inspect(t.Root, func(n parse.Node) {
			switch n := n.(type) {
			case *parse.ActionNode:
				if len(n.Pipe.Decl) > 0 {
					return // an assignment prints nothing
				}
				id := parse.NewIdentifier(printFunc).SetTree(t.Tree).SetPos(n.Pipe.Pos)
				n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
					NodeType: parse.NodeCommand, Pos: n.Pipe.Pos, Args: []parse.Node{id},
				})
			case *parse.TemplateNode:
				if err == nil && set.Lookup(n.Name) == nil {
					loc, _ := t.ErrorContext(n)
					err = fmt.Errorf("prompt %s: no such template %q", loc, n.Name)
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// inspect calls f for n and every node below it, parents first.
func inspect(n parse.Node, f func(parse.Node)) {
	f(n)
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			inspect(c, f)
		}
	case *parse.ActionNode:
		inspect(n.Pipe, f)
	case *parse.IfNode:
		inspectBranch(&n.BranchNode, f)
	case *parse.RangeNode:
		inspectBranch(&n.BranchNode, f)
	case *parse.WithNode:
		inspectBranch(&n.BranchNode, f)
	case *parse.TemplateNode:
		if n.Pipe != nil {
			inspect(n.Pipe, f)
		}
	case *parse.PipeNode:
		for _, c := range n.Cmds {
			inspect(c, f)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			inspect(a, f)
		}
	case *parse.ChainNode:
		inspect(n.Node, f)
	}
}

func inspectBranch(b *parse.BranchNode, f func(parse.Node)) {
	inspect(b.Pipe, f)
	inspect(b.List, f)
	if b.ElseList != nil {
		inspect(b.ElseList, f)
	}
}
