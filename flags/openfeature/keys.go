package openfeature

import (
	"strings"

	of "github.com/open-feature/go-sdk/openfeature"
)

// The flag keys of the package doc: "afloat.kill", then "afloat.<task>.<attr>".
const (
	keyPrefix     = "afloat."
	attrKill      = "kill"
	attrEnabled   = "enabled"
	attrBlocklist = "blocklist"
	attrRollout   = "rollout_pct"

	globalKillKey = keyPrefix + attrKill
)

// taskKey returns the key of a task's attribute.
func taskKey(task, attr string) string { return keyPrefix + task + "." + attr }

// key is a parsed flag key; task is empty for the global kill.
type key struct {
	task, attr string
}

// parseKey parses an afloat flag key and reports whether flag is one. The task is what lies
// between the prefix and the last dot, so a task name may itself hold dots.
func parseKey(flag string) (key, bool) {
	rest, ok := strings.CutPrefix(flag, keyPrefix)
	if !ok {
		return key{}, false
	}
	if rest == attrKill {
		return key{attr: attrKill}, true
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return key{}, false
	}
	k := key{task: rest[:i], attr: rest[i+1:]}
	switch k.attr {
	case attrKill, attrEnabled, attrBlocklist, attrRollout:
		return k, true
	}
	return key{}, false
}

// typ returns the OpenFeature type of the flag.
func (k key) typ() of.Type {
	switch k.attr {
	case attrBlocklist:
		return of.Object
	case attrRollout:
		return of.Int
	}
	return of.Boolean
}
