package prompt

import (
	"text/template"
	"text/template/parse"
)

// scope says what the dot and $ hold at a point of a template: the input itself, or something
// else (an element of range, the value of with, the data passed to another template).
type scope struct {
	dotTop, dollarTop bool
}

// fieldWalker collects the top-level input fields that one message template reads.
type fieldWalker struct {
	set    *template.Template
	fields map[string]struct{}
	called map[calledKey]bool // templates walked, so that recursion ends
}

type calledKey struct {
	name string
	scope
}

// collectFields adds to fields the input fields that the message template set reads: every
// field chain rooted at the input (.subject, $.subject, .customer.name → customer, index .
// "subject"), in actions and in the pipelines of if, range and with, and inside templates
// called with the input as their data.
func collectFields(set *template.Template, fields map[string]struct{}) {
	w := &fieldWalker{set: set, fields: fields, called: make(map[calledKey]bool)}
	w.walk(set.Root, scope{dotTop: true, dollarTop: true})
}

func (w *fieldWalker) walk(n parse.Node, s scope) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			w.walk(c, s)
		}
	case *parse.ActionNode:
		w.walk(n.Pipe, s)
	case *parse.IfNode:
		w.branch(&n.BranchNode, s, s)
	case *parse.WithNode:
		// {{with .}} keeps the input as the dot; any other value replaces it.
		w.branch(&n.BranchNode, s, scope{dotTop: s.isInput(n.Pipe), dollarTop: s.dollarTop})
	case *parse.RangeNode:
		w.branch(&n.BranchNode, s, scope{dotTop: false, dollarTop: s.dollarTop})
	case *parse.TemplateNode:
		if n.Pipe == nil {
			return // the called template's data is nil
		}
		w.walk(n.Pipe, s)
		if s.isInput(n.Pipe) {
			w.call(n.Name, scope{dotTop: true, dollarTop: true})
		}
	case *parse.PipeNode:
		for _, c := range n.Cmds {
			w.walk(c, s)
		}
	case *parse.CommandNode:
		if key, ok := s.indexKey(n); ok {
			w.fields[key] = struct{}{}
		}
		for _, a := range n.Args {
			w.walk(a, s)
		}
	case *parse.FieldNode:
		if s.dotTop {
			w.fields[n.Ident[0]] = struct{}{}
		}
	case *parse.VariableNode:
		if s.dollarTop && n.Ident[0] == "$" && len(n.Ident) > 1 {
			w.fields[n.Ident[1]] = struct{}{}
		}
	case *parse.ChainNode:
		w.walk(n.Node, s)
		if p, ok := n.Node.(*parse.PipeNode); ok && s.isInput(p) && len(n.Field) > 0 {
			w.fields[n.Field[0]] = struct{}{} // (.).subject
		}
	}
}

// branch walks an if, range or with: its pipeline and else branch see the outer dot, its body
// sees inner.
func (w *fieldWalker) branch(b *parse.BranchNode, outer, inner scope) {
	w.walk(b.Pipe, outer)
	w.walk(b.List, inner)
	if b.ElseList != nil {
		w.walk(b.ElseList, outer)
	}
}

func (w *fieldWalker) call(name string, s scope) {
	key := calledKey{name: name, scope: s}
	if w.called[key] {
		return
	}
	w.called[key] = true
	if t := w.set.Lookup(name); t != nil && t.Tree != nil {
		w.walk(t.Root, s)
	}
}

// isInput reports whether pipe evaluates to the input itself: "." or "$" where they hold it.
func (s scope) isInput(pipe *parse.PipeNode) bool {
	if pipe == nil || len(pipe.Decl) > 0 || len(pipe.Cmds) != 1 || len(pipe.Cmds[0].Args) != 1 {
		return false
	}
	return s.holdsInput(pipe.Cmds[0].Args[0])
}

func (s scope) holdsInput(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.DotNode:
		return s.dotTop
	case *parse.VariableNode:
		return s.dollarTop && len(n.Ident) == 1 && n.Ident[0] == "$"
	}
	return false
}

// indexKey returns the key of a command `index . "key"` that reads a field of the input.
func (s scope) indexKey(cmd *parse.CommandNode) (string, bool) {
	if len(cmd.Args) < 3 {
		return "", false
	}
	fn, ok := cmd.Args[0].(*parse.IdentifierNode)
	if !ok || fn.Ident != "index" || !s.holdsInput(cmd.Args[1]) {
		return "", false
	}
	key, ok := cmd.Args[2].(*parse.StringNode)
	if !ok {
		return "", false
	}
	return key.Text, true
}
