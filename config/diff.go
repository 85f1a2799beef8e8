package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/prompt"
)

// ChangeKind says how a key differs between two configs.
type ChangeKind string

const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	Changed ChangeKind = "changed"
)

// Change is one difference between two configs.
type Change struct {
	// Path is the key path ("tasks.triage.cascade[0].prompt"); an added or removed provider,
	// task, route, tenant or operator is one change at its own path ("routes.support").
	Path string     `json:"path"`
	Kind ChangeKind `json:"kind"`
	// Detail says what changed where that says no secret: a number, a duration, a provider's
	// name, a prompt's version ("v3 → v4"), "content" for a file (schema, prompt) whose
	// path stayed and whose text did not. "" otherwise.
	Detail string `json:"detail,omitempty"`
	// Restart is set on a key that a reload does not apply (server.listen, state, review,
	// flags, telemetry, alerts, drill): a reload that changes one is refused.
	Restart bool `json:"restart,omitempty"`
}

// String reads "+ tasks.summary", "~ tasks.triage.budget: 1.5s → 2s" or
// "! server.listen: needs a restart".
func (c Change) String() string {
	mark := map[ChangeKind]string{Added: "+", Removed: "-", Changed: "~"}[c.Kind]
	if c.Restart {
		mark = "!"
	}
	s := mark + " " + c.Path
	if c.Detail != "" {
		s += ": " + c.Detail
	} else if c.Kind != Changed {
		s += ": " + string(c.Kind)
	}
	if c.Restart {
		s += " (needs a restart)"
	}
	return s
}

// Diff is what going from one config to another changes, as a reload would apply it.
type Diff struct {
	// From and To are the two configs' versions (File.Version).
	From, To string
	// Changes are in the order of the file's keys.
	Changes []Change
}

// Restart returns the changes a reload cannot apply.
func (d *Diff) Restart() []Change {
	var out []Change
	for _, c := range d.Changes {
		if c.Restart {
			out = append(out, c)
		}
	}
	return out
}

// changed reports whether anything under path (a provider, task or route) changed.
func (d *Diff) changed(path string) bool {
	for _, c := range d.Changes {
		if c.Path == path || strings.HasPrefix(c.Path, path+".") || strings.HasPrefix(c.Path, path+"[") {
			return true
		}
	}
	return false
}

// String lists the changes one per line; "no change" when there is none.
func (d *Diff) String() string {
	if len(d.Changes) == 0 {
		return "no change\n"
	}
	var b strings.Builder
	for _, c := range d.Changes {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// restartOnly are the top-level blocks a reload does not apply: the listener, credentials
// and logging of the process (server, operators), and the stores, exporters and evaluators
// it opened at start. Providers, tasks, routes, tenants and defaults are reloaded.
var restartOnly = []string{"server", "state", "review", "operators", "flags", "telemetry", "alerts", "drill"}

// reloadable are the keys under restartOnly blocks that a reload applies all the same: what
// the gateway serves by name.
var reloadable = []string{"server.default_route"}

func needsRestart(path string) bool {
	for _, k := range reloadable {
		if path == k || strings.HasPrefix(path, k+".") {
			return false
		}
	}
	for _, k := range restartOnly {
		if path == k || strings.HasPrefix(path, k+".") || strings.HasPrefix(path, k+"[") {
			return true
		}
	}
	return false
}

// Compare returns what changes from one config to the other, key by key, files named by
// them (schemas, prompts, CA files) included by content. Both must come from Load or Parse.
func Compare(from, to *File) *Diff {
	d := &differ{from: from, to: to}
	d.value("", reflect.ValueOf(from).Elem(), reflect.ValueOf(to).Elem())
	for _, p := range to.Providers {
		if from.Provider(p.Name) != nil && d.changedUnder("providers."+p.Name) {
			d.out = append(d.out, Change{Path: "providers." + p.Name, Kind: Changed,
				Detail: "settings changed: a fresh breaker, bulkhead, retry budget and latency estimates"})
		}
	}
	for i := range d.out {
		d.out[i].Restart = needsRestart(d.out[i].Path)
	}
	return &Diff{From: from.Version(), To: to.Version(), Changes: d.out}
}

type differ struct {
	from, to *File
	out      []Change
}

func (d *differ) add(path string, kind ChangeKind, detail string) {
	d.out = append(d.out, Change{Path: path, Kind: kind, Detail: detail})
}

func (d *differ) changedUnder(path string) bool {
	return (&Diff{Changes: d.out}).changed(path)
}

var (
	alertType  = reflect.TypeFor[Alert]()
	secretType = reflect.TypeFor[afloat.Secret]()
)

// value compares a and b, of one type, at path.
func (d *differ) value(path string, a, b reflect.Value) {
	switch a.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() || b.IsNil():
			d.add(path, Changed, d.detail(path, a, b))
		default:
			d.value(path, a.Elem(), b.Elem())
		}
	case reflect.Struct:
		if a.Type() == alertType {
			on, was := b.FieldByName("On").Bool(), a.FieldByName("On").Bool()
			switch {
			case on && !was:
				d.add(path, Added, "")
				return
			case was && !on:
				d.add(path, Removed, "")
				return
			}
		}
		for i := range a.NumField() {
			sf := a.Type().Field(i)
			tag, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if !sf.IsExported() || tag == "" || tag == "-" {
				continue
			}
			p := join(path, tag)
			if opts == "keyed" {
				d.keyed(p, a.Field(i), b.Field(i))
				continue
			}
			d.value(p, a.Field(i), b.Field(i))
		}
	case reflect.Slice:
		elem := a.Type().Elem()
		if a.Type() != fieldsType && elem.Kind() == reflect.Struct {
			// Tiers: compared one by one, so that a prompt's new version shows.
			for i := range max(a.Len(), b.Len()) {
				p := fmt.Sprintf("%s[%d]", path, i)
				switch {
				case i >= a.Len():
					d.add(p, Added, tierDetail(b.Index(i)))
				case i >= b.Len():
					d.add(p, Removed, tierDetail(a.Index(i)))
				default:
					d.value(p, a.Index(i), b.Index(i))
				}
			}
			return
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			d.add(path, Changed, "")
		}
	case reflect.Map:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			d.add(path, Changed, "")
		}
	default:
		if a.Kind() == reflect.String && (isFileKey(path) || path == "review.sqlite.path") {
			d.file(path, a.String(), b.String())
			return
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			d.add(path, Changed, d.detail(path, a, b))
		}
	}
}

// file compares a key that names a file: by its path relative to its config's folder (two
// copies of a config in two folders name the same files), then, for a file the config
// reads (isFileKey), by its content.
func (d *differ) file(path, a, b string) {
	ra, rb := d.from.rel(a), d.to.rel(b)
	switch {
	case ra != rb:
		detail := fmt.Sprintf("%s → %s", orNone(ra), orNone(rb))
		va, vb := prompt.Version(ra), prompt.Version(rb)
		if va != vb && strings.TrimSuffix(ra, va+".tmpl") == strings.TrimSuffix(rb, vb+".tmpl") {
			detail = fmt.Sprintf("version %s → %s", orNone(va), orNone(vb)) // the same prompt, a new version
		}
		d.add(path, Changed, detail)
	case a != "" && isFileKey(path) && d.from.digest(a) != d.to.digest(b):
		d.add(path, Changed, "content")
	}
}

// keyed compares two lists of named entities (providers, tasks, routes, tenants,
// operators) by name.
func (d *differ) keyed(path string, a, b reflect.Value) {
	name := func(v reflect.Value) string { return v.Elem().FieldByName("Name").String() }
	index := func(list reflect.Value) map[string]reflect.Value {
		m := map[string]reflect.Value{}
		for i := range list.Len() {
			m[name(list.Index(i))] = list.Index(i)
		}
		return m
	}
	was, now := index(a), index(b)
	for i := range a.Len() {
		if n := name(a.Index(i)); !now[n].IsValid() {
			d.add(path+"."+n, Removed, "")
		}
	}
	for i := range b.Len() {
		n := name(b.Index(i))
		if old := was[n]; old.IsValid() {
			d.value(path+"."+n, old, b.Index(i))
		} else {
			d.add(path+"."+n, Added, "")
		}
	}
}

// tierDetail names the provider of a tier added or removed.
func tierDetail(v reflect.Value) string {
	if f := v.FieldByName("Provider"); f.IsValid() && f.Kind() == reflect.String {
		return "provider " + f.String()
	}
	return ""
}

// safeKeys are the string keys whose values are shown: names and enums, never a URL, a
// token or a header (which may carry a credential).
var safeKeys = []string{"provider", "type", "model", "dialect", "criticality", "on_exhausted", "on_refusal",
	"system_mode", "probe", "continuation", "listen", "debug_listen", "log_level", "access_log", "backend",
	"on_failure", "store", "currency", "scope", "protocol", "default_route"}

// detail says what a changed scalar was and is, where that tells no secret.
func (d *differ) detail(path string, a, b reflect.Value) string {
	key := path[strings.LastIndexByte(path, '.')+1:]
	if i := strings.IndexByte(key, '['); i >= 0 {
		key = key[:i]
	}
	if a.Type() == secretType {
		return ""
	}
	show := func(v reflect.Value) string {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return "(none)"
			}
			v = v.Elem()
		}
		if v.Kind() == reflect.String {
			return orNone(v.String())
		}
		return fmt.Sprint(v.Interface())
	}
	if a.Kind() == reflect.String && !slices.Contains(safeKeys, key) {
		return ""
	}
	return show(a) + " → " + show(b)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// isFileKey reports whether the key at path names a file whose content counts.
func isFileKey(path string) bool {
	key := path[strings.LastIndexByte(path, '.')+1:]
	switch key {
	case "schema", "prompt", "reask_prompt", "ca_file":
		return strings.HasPrefix(path, "tasks.") || strings.HasPrefix(path, "routes.") || strings.HasPrefix(path, "providers.")
	}
	return false
}

// Version names the config: a digest of the file's text as written (before ${VAR}
// expansion) and of every file it names (schemas, prompts, re-ask prompts, CA files) by path
// relative to the config file's folder, so that one set of files has one version wherever it
// is checked or served. `afloat check --diff` prints it, and /admin/status shows the version
// in force.
func (f *File) Version() string { return f.version }

// digest returns the digest the file at path had when f was loaded; "" for a file f does not
// name or that could not be read.
func (f *File) digest(path string) string { return f.digests[path] }

// rel returns path relative to the config file's folder when it lies under it.
func (f *File) rel(path string) string {
	if r, err := filepath.Rel(f.Dir, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return path
}

// named returns the files f names, each once, in the file's order.
func (f *File) named() []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range f.Providers {
		add(p.CAFile)
	}
	for _, t := range f.Tasks {
		add(t.Schema)
		for _, tr := range t.Cascade {
			add(tr.Prompt)
			add(tr.ReaskPrompt)
		}
	}
	for _, r := range f.Routes {
		for _, tr := range r.Cascade {
			add(tr.ReaskPrompt)
		}
	}
	return out
}

// stamp reads every file f names and records its digest and f's version: what the config
// was when it was loaded, for Compare to tell a prompt edited in place since.
func (f *File) stamp(text []byte) {
	f.digests = map[string]string{}
	h := sha256.New()
	h.Write(text)
	for _, p := range f.named() {
		if d := digestFile(p); d != "" {
			f.digests[p] = d
		}
		fmt.Fprintf(h, "\x00%s\x00%s", f.rel(p), f.digests[p])
	}
	f.version = "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// maxDigested bounds what stamp reads of one file: far above any prompt, schema or CA file.
const maxDigested = 16 << 20

// digestFile returns the hex SHA-256 of the regular file at path, "" when there is none (a
// missing file, a device, a folder: Build reports those) or it is larger than maxDigested.
func digestFile(path string) string {
	fl, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fl.Close()
	if st, err := fl.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > maxDigested {
		return ""
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(fl, maxDigested)); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
