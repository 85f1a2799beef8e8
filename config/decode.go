package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
)

// maxNodes bounds the nodes one document may decode into, aliases expanded, so that a file of
// nested aliases ("billion laughs") is an error rather than a hang.
const maxNodes = 1 << 20

// decoder turns a YAML syntax tree into a File, by reflection over the yaml tags. Unlike a
// plain unmarshal it keeps going after an error, so that one run reports every problem with
// its key path and line, and it expands ${VAR} in scalar values only (comments are not in the
// tree). It records the line of every key it meets: what it did not meet was left out.
type decoder struct {
	env     func(string) (string, bool)
	anchors map[string]ast.Node
	lines   map[string]int
	errs    Errors
	nodes   int
	// masks restores the ${...} that maskEnv hid from the YAML parser; nil when none.
	masks *strings.Replacer
}

func (d *decoder) errorf(path string, line int, format string, args ...any) {
	d.errs = append(d.errs, &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func lineOf(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// collectAnchors records every anchor of the tree, for aliases to resolve.
func (d *decoder) collectAnchors(root ast.Node) {
	ast.Walk(anchorVisitor(d.anchors), root)
}

type anchorVisitor map[string]ast.Node

func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
		v[a.Name.GetToken().Value] = a.Value
	}
	return v
}

// resolve looks through anchors, aliases and tags to the node that holds the value. It returns
// nil for an empty value and for an alias it cannot resolve (after reporting it).
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	for hops := 0; n != nil; hops++ {
		if hops > 64 {
			d.errorf(path, lineOf(n), "aliases nest too deep")
			return nil
		}
		switch x := n.(type) {
		case *ast.AnchorNode:
			n = x.Value
		case *ast.TagNode:
			n = x.Value
		case *ast.AliasNode:
			name := ""
			if x.Value != nil {
				name = x.Value.GetToken().Value
			}
			target, ok := d.anchors[name]
			if !ok {
				d.errorf(path, lineOf(n), "unknown alias *%s", name)
				return nil
			}
			n = target
		case *ast.CommentGroupNode, *ast.CommentNode:
			return nil
		default:
			return n
		}
	}
	return nil
}

// count charges one decoded node against maxNodes and reports whether decoding may go on.
func (d *decoder) count(path string, n ast.Node) bool {
	d.nodes++
	if d.nodes == maxNodes+1 {
		d.errorf(path, lineOf(n), "document expands to more than %d values", maxNodes)
	}
	return d.nodes <= maxNodes
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	sizeType        = reflect.TypeFor[Size]()
	shareType       = reflect.TypeFor[Share]()
	criticalityType = reflect.TypeFor[afloat.Criticality]()
	policyType      = reflect.TypeFor[cascade.Policy]()
	systemModeType  = reflect.TypeFor[cascade.SystemMode]()
	fieldsType      = reflect.TypeFor[Fields]()
	routeTierType   = reflect.TypeFor[RouteTier]()
)

// decode decodes n into v, which must be settable. An empty (null) value leaves v as it is.
func (d *decoder) decode(n ast.Node, v reflect.Value, path string) {
	n = d.resolve(n, path)
	if n == nil || n.Type() == ast.NullType || !d.count(path, n) {
		return
	}
	switch v.Type() {
	case durationType:
		if s, ok := d.scalar(n, path, "a duration"); ok {
			dur, err := time.ParseDuration(s)
			if err != nil {
				d.errorf(path, lineOf(n), "invalid duration %q (want a Go duration such as 700ms or 1m30s)", s)
				return
			}
			v.SetInt(int64(dur))
		}
		return
	case sizeType:
		if s, ok := d.scalar(n, path, "a size"); ok {
			size, err := ParseSize(s)
			if err != nil {
				d.errorf(path, lineOf(n), "%v", err)
				return
			}
			v.SetInt(size)
		}
		return
	case shareType:
		if s, ok := d.scalar(n, path, "a share"); ok {
			share, err := ParseShare(s)
			if err != nil {
				d.errorf(path, lineOf(n), "%v", err)
				return
			}
			v.SetFloat(share)
		}
		return
	case criticalityType:
		if s, ok := d.scalar(n, path, "a criticality"); ok {
			c, err := afloat.ParseCriticality(s)
			if err != nil {
				d.errorf(path, lineOf(n), "%v", err)
				return
			}
			v.SetInt(int64(c))
		}
		return
	case policyType:
		if s, ok := d.scalar(n, path, "a policy"); ok {
			p, err := cascade.ParsePolicy(s)
			if err != nil {
				d.errorf(path, lineOf(n), "%v", err)
				return
			}
			v.SetString(string(p))
		}
		return
	case systemModeType:
		if s, ok := d.scalar(n, path, "a system mode"); ok {
			switch m := cascade.SystemMode(s); m {
			case cascade.SystemReplace, cascade.SystemPrepend:
				v.SetString(s)
			default:
				d.errorf(path, lineOf(n), "unknown system_mode %q (want replace or prepend)", s)
			}
		}
		return
	case fieldsType:
		d.decodeFields(n, v, path)
		return
	case routeTierType:
		if _, ok := n.(ast.ScalarNode); ok {
			if s, ok := d.scalar(n, path, "a provider name or an object"); ok {
				v.FieldByName("Provider").SetString(s)
				d.lines[path+".provider"] = lineOf(n)
			}
			return
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Interface:
		if val, ok := d.generic(n, path); ok {
			if val == nil {
				v.SetZero()
			} else {
				v.Set(reflect.ValueOf(val))
			}
		}
	case reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		d.decodeBool(n, v, path)
	case reflect.Int, reflect.Int64, reflect.Int32:
		d.decodeInt(n, v, path)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		d.decodeUint(n, v, path)
	case reflect.Float64, reflect.Float32:
		d.decodeFloat(n, v, path)
	default:
		d.errorf(path, lineOf(n), "cannot decode into %s", v.Type())
	}
}

// scalar returns the text of a scalar node, ${VAR} expanded in strings. want names the
// expected value in the error for a mapping or a sequence.
func (d *decoder) scalar(n ast.Node, path, want string) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return d.expand(d.unmask(x.Value), path, lineOf(x))
	case *ast.LiteralNode:
		// The text starts on the line after the indicator (| or >).
		return d.expand(d.unmask(x.Value.Value), path, lineOf(x)+1)
	case *ast.MappingNode, *ast.SequenceNode:
		d.errorf(path, lineOf(n), "want %s, not a %s", want, kindName(n))
		return "", false
	case ast.ScalarNode:
		return d.unmask(n.GetToken().Value), true
	}
	d.errorf(path, lineOf(n), "want %s, not a %s", want, kindName(n))
	return "", false
}

func kindName(n ast.Node) string {
	switch n.Type() {
	case ast.MappingType:
		return "mapping"
	case ast.SequenceType:
		return "list"
	}
	return n.Type().YAMLName()
}

// expand replaces ${NAME} with the environment's value and ${NAME:-default} with it or, when
// it is unset or empty, with default; $${ stands for a literal ${. Every unset variable
// without a default is reported, on the line it appears on.
func (d *decoder) expand(s, path string, line int) (string, bool) {
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	ok := true
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			at := line + strings.Count(s[:i], "\n")
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				d.errorf(path, at, "unterminated ${ (write $${ for a literal ${)")
				return "", false
			}
			name := s[i+2 : i+end]
			i += end + 1
			name, def, hasDefault := strings.Cut(name, ":-")
			if !validEnvName(name) {
				d.errorf(path, at, "invalid environment variable name %q", name)
				ok = false
				continue
			}
			val, found := d.env(name)
			if hasDefault && val == "" {
				val, found = def, true
			}
			if !found {
				d.errorf(path, at, "environment variable %s is not set", name)
				ok = false
				continue
			}
			b.WriteString(val)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), ok
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func (d *decoder) decodeBool(n ast.Node, v reflect.Value, path string) {
	if b, ok := n.(*ast.BoolNode); ok {
		v.SetBool(b.Value)
		return
	}
	s, ok := d.scalar(n, path, "true or false")
	if !ok {
		return
	}
	switch s {
	case "true":
		v.SetBool(true)
	case "false":
		v.SetBool(false)
	default:
		d.errorf(path, lineOf(n), "invalid boolean %q (want true or false)", s)
	}
}

func (d *decoder) decodeInt(n ast.Node, v reflect.Value, path string) {
	s, ok := d.number(n, path, "an integer")
	if !ok {
		return
	}
	i, err := strconv.ParseInt(s, 0, 64)
	if err != nil || v.OverflowInt(i) {
		d.errorf(path, lineOf(n), "invalid integer %q", s)
		return
	}
	v.SetInt(i)
}

func (d *decoder) decodeUint(n ast.Node, v reflect.Value, path string) {
	s, ok := d.number(n, path, "a non-negative integer")
	if !ok {
		return
	}
	u, err := strconv.ParseUint(s, 0, 64)
	if err != nil || v.OverflowUint(u) {
		d.errorf(path, lineOf(n), "invalid non-negative integer %q", s)
		return
	}
	v.SetUint(u)
}

func (d *decoder) decodeFloat(n ast.Node, v reflect.Value, path string) {
	s, ok := d.number(n, path, "a number")
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.errorf(path, lineOf(n), "invalid number %q", s)
		return
	}
	v.SetFloat(f)
}

// number returns the text of a numeric scalar, without YAML's digit separators.
func (d *decoder) number(n ast.Node, path, want string) (string, bool) {
	if _, ok := n.(*ast.BoolNode); ok {
		d.errorf(path, lineOf(n), "want %s, not %s", want, n.GetToken().Value)
		return "", false
	}
	s, ok := d.scalar(n, path, want)
	return strings.ReplaceAll(strings.TrimSpace(s), "_", ""), ok
}

// entry is one key of a mapping, merge keys (<<) expanded.
type entry struct {
	key   string
	line  int
	value ast.Node
}

// entries returns the keys of a mapping in order, with the keys of merged mappings first and
// overridden by the mapping's own. A duplicate key is an error.
func (d *decoder) entries(m *ast.MappingNode, path string) []entry {
	var own, merged []entry
	seen := map[string]bool{}
	for _, mv := range m.Values {
		if mv == nil || mv.Key == nil {
			continue
		}
		if mv.Key.IsMergeKey() {
			merged = append(merged, d.mergeEntries(mv.Value, path)...)
			continue
		}
		key, ok := d.key(mv.Key, path)
		if !ok {
			continue
		}
		if seen[key] {
			d.errorf(join(path, key), lineOf(mv.Key), "duplicate key %q", key)
			continue
		}
		seen[key] = true
		own = append(own, entry{key: key, line: lineOf(mv.Key), value: mv.Value})
	}
	var out []entry
	for _, e := range merged {
		if !seen[e.key] {
			seen[e.key] = true
			out = append(out, e)
		}
	}
	return append(out, own...)
}

func (d *decoder) mergeEntries(n ast.Node, path string) []entry {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case *ast.MappingNode:
		return d.entries(x, path)
	case *ast.SequenceNode:
		var out []entry
		for _, item := range x.Values {
			out = append(out, d.mergeEntries(item, path)...)
		}
		return out
	case nil:
		return nil
	}
	d.errorf(path, lineOf(n), "a merge key (<<) takes a mapping")
	return nil
}

func (d *decoder) key(k ast.MapKeyNode, path string) (string, bool) {
	n := d.resolve(k, path)
	switch x := n.(type) {
	case *ast.StringNode:
		return d.unmask(x.Value), true
	case ast.ScalarNode:
		if n.Type() != ast.NullType {
			return d.unmask(n.GetToken().Value), true
		}
	}
	d.errorf(path, lineOf(k), "a key must be a plain string")
	return "", false
}

// join appends a key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) mapping(n ast.Node, path, what string) (*ast.MappingNode, bool) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.errorf(path, lineOf(n), "want %s (a mapping), not a %s", what, kindName(n))
	}
	return m, ok
}

type structField struct {
	index int
	keyed bool
}

func fieldsOf(t reflect.Type) (map[string]structField, []string) {
	fields := map[string]structField{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		fields[name] = structField{index: i, keyed: opt == "keyed"}
		names = append(names, name)
	}
	return fields, names
}

func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, path string) {
	m, ok := d.mapping(n, path, "an object")
	if !ok {
		return
	}
	fields, names := fieldsOf(v.Type())
	for _, e := range d.entries(m, path) {
		p := join(path, e.key)
		f, ok := fields[e.key]
		if !ok {
			d.errorf(p, e.line, "unknown key %q (want one of %s)", e.key, strings.Join(names, ", "))
			continue
		}
		d.lines[p] = e.line
		if f.keyed {
			d.decodeKeyed(e.value, v.Field(f.index), p)
			continue
		}
		d.decode(e.value, v.Field(f.index), p)
	}
}

// decodeKeyed decodes a mapping of name → object into a slice of *T whose Name field takes
// the key, keeping the file's order.
func (d *decoder) decodeKeyed(n ast.Node, v reflect.Value, path string) {
	n = d.resolve(n, path)
	if n == nil || n.Type() == ast.NullType {
		return
	}
	m, ok := d.mapping(n, path, "a mapping of names")
	if !ok {
		return
	}
	elem := v.Type().Elem().Elem()
	for _, e := range d.entries(m, path) {
		p := join(path, e.key)
		d.lines[p] = e.line
		item := reflect.New(elem)
		item.Elem().FieldByName("Name").SetString(e.key)
		d.decode(e.value, item.Elem(), p)
		v.Set(reflect.Append(v, item))
	}
}

func (d *decoder) decodeSlice(n ast.Node, v reflect.Value, path string) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.errorf(path, lineOf(n), "want a list, not a %s", kindName(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = lineOf(item)
		d.decode(item, out.Index(i), p)
	}
	v.Set(out)
}

func (d *decoder) decodeMap(n ast.Node, v reflect.Value, path string) {
	m, ok := d.mapping(n, path, "a mapping")
	if !ok {
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, e := range d.entries(m, path) {
		p := join(path, e.key)
		d.lines[p] = e.line
		val := reflect.New(v.Type().Elem()).Elem()
		d.decode(e.value, val, p)
		v.SetMapIndex(reflect.ValueOf(e.key).Convert(v.Type().Key()), val)
	}
}

// decodeFields decodes a task's input: field name → JSON Schema, in order.
func (d *decoder) decodeFields(n ast.Node, v reflect.Value, path string) {
	m, ok := d.mapping(n, path, "a mapping of field names to JSON Schemas")
	if !ok {
		return
	}
	var fs Fields
	for _, e := range d.entries(m, path) {
		p := join(path, e.key)
		d.lines[p] = e.line
		val, ok := d.generic(e.value, p)
		if !ok {
			continue
		}
		schema, isMap := val.(map[string]any)
		if !isMap {
			d.errorf(p, e.line, "want a JSON Schema object such as {type: string}")
			continue
		}
		fs = append(fs, Field{Name: e.key, Schema: schema})
	}
	v.Set(reflect.ValueOf(fs))
}

// generic decodes n into plain Go values fit for encoding/json: map[string]any, []any,
// string, int64, uint64, float64, bool and nil.
func (d *decoder) generic(n ast.Node, path string) (any, bool) {
	n = d.resolve(n, path)
	if n == nil || n.Type() == ast.NullType {
		return nil, true
	}
	if !d.count(path, n) {
		return nil, false
	}
	switch x := n.(type) {
	case *ast.MappingNode:
		out := map[string]any{}
		ok := true
		for _, e := range d.entries(x, path) {
			p := join(path, e.key)
			d.lines[p] = e.line
			val, vok := d.generic(e.value, p)
			ok = ok && vok
			out[e.key] = val
		}
		return out, ok
	case *ast.SequenceNode:
		out := make([]any, 0, len(x.Values))
		ok := true
		for i, item := range x.Values {
			val, vok := d.generic(item, fmt.Sprintf("%s[%d]", path, i))
			ok = ok && vok
			out = append(out, val)
		}
		return out, ok
	case *ast.StringNode, *ast.LiteralNode:
		return d.scalar(n, path, "a value")
	case *ast.IntegerNode:
		if u, ok := x.Value.(uint64); ok && u <= math.MaxInt64 {
			return int64(u), true
		}
		return x.Value, true
	case *ast.FloatNode:
		return x.Value, true
	case *ast.BoolNode:
		return x.Value, true
	case *ast.InfinityNode, *ast.NanNode:
		d.errorf(path, lineOf(n), "%s is not a JSON number", n.GetToken().Value)
		return nil, false
	}
	d.errorf(path, lineOf(n), "unsupported value %q", d.unmask(n.GetToken().Value))
	return nil, false
}
