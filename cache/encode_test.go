package cache

import (
	"bytes"
	"testing"
	"time"
)

func TestEncodeRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	for _, e := range []Entry{
		{Value: []byte(`{"queue": "billing" }`), PromptVersion: "triage/openai/v3", Provider: "openai", Tier: 2, At: at},
		{Value: []byte(`"x"`), At: at, Tier: -1},
		{At: at},
	} {
		exp := at.Add(time.Hour)
		got, gotExp, err := decode(encode(e, exp))
		if err != nil {
			t.Fatalf("decode(encode(%+v)) = %v", e, err)
		}
		if !bytes.Equal(got.Value, e.Value) || got.PromptVersion != e.PromptVersion ||
			got.Provider != e.Provider || got.Tier != e.Tier || !got.At.Equal(e.At) || !gotExp.Equal(exp) {
			t.Errorf("decode(encode(%+v, %v)) = %+v, %v", e, exp, got, gotExp)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	b := encode(Entry{PromptVersion: "triage/openai/v3", Provider: "openai", At: time.Unix(1, 0)}, time.Unix(2, 0))
	// Every cut inside the header is an error, not an entry with fields missing.
	for i := range b {
		if _, _, err := decode(b[:i]); err == nil {
			t.Errorf("decode of the first %d of %d bytes: no error", i, len(b))
		}
	}
	other := append([]byte{encodingV1 + 1}, b[1:]...)
	if _, _, err := decode(other); err == nil {
		t.Error("decode of another version: no error")
	}
}
