package afloat_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

// TestSecretRedacts: a Secret, alone or inside a struct, never shows its value through fmt's
// verbs, log/slog's handlers or encoding/json; Reveal gives it.
func TestSecretRedacts(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	type holder struct {
		Name   string
		APIKey afloat.Secret
		Extra  map[string]afloat.Secret
	}
	s := afloat.Secret(key)
	h := holder{Name: "primary", APIKey: s, Extra: map[string]afloat.Secret{"X-Token": s}}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	outs = append(outs, fmt.Sprint(s), fmt.Sprintln(h))
	for _, newHandler := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var b bytes.Buffer
		slog.New(newHandler(&b)).Info("config", "key", s, "holder", h, slog.Any("ptr", &h))
		outs = append(outs, b.String())
	}
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	for _, out := range outs {
		if strings.Contains(out, key) || strings.Contains(out, fmt.Sprintf("%x", key)) {
			t.Errorf("the key shows in %q", out)
		}
	}
	if !strings.Contains(string(j), `"APIKey":"[redacted]"`) {
		t.Errorf("json %s, want the key as [redacted]", j)
	}
	if s.Reveal() != key {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
	if got := fmt.Sprint(afloat.Secret("")); got != "" {
		t.Errorf("an empty secret prints %q, want nothing: no key reads as none", got)
	}
}
