package fault

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/jonboulle/clockwork"
)

// TestFaultClearsItselfAfterTTL: a fault with a TTL holds until the TTL has passed at the
// provider's clock, reports the time left meanwhile, and then lets calls through again.
func TestFaultClearsItselfAfterTTL(t *testing.T) {
	clk := clockwork.NewFakeClock()
	inner := &counting{}
	p := Wrap("primary", inner, clk)
	if err := p.Set(Fault{Mode: ModeUnavailable, TTL: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	st := p.State()
	if st.Fault.Mode != ModeUnavailable || !st.ExpiresAt.Equal(clk.Now().Add(15*time.Minute)) || st.Remaining != 15*time.Minute {
		t.Fatalf("state %+v", st)
	}
	clk.Advance(14 * time.Minute)
	if _, err := p.Complete(context.Background(), &afloat.Request{}); err == nil {
		t.Fatal("the fault cleared before its TTL")
	}
	if got := p.State().Remaining; got != time.Minute {
		t.Fatalf("remaining %v, want 1m", got)
	}
	clk.Advance(time.Minute)
	if _, err := p.Complete(context.Background(), &afloat.Request{}); err != nil {
		t.Fatalf("the fault still holds after its TTL: %v", err)
	}
	if st := p.State(); st != (State{}) || inner.calls.Load() != 1 {
		t.Fatalf("state %+v after the TTL, %d calls", st, inner.calls.Load())
	}

	// Without a TTL the fault holds until cleared.
	if err := p.Set(Fault{Mode: ModeMalformed}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1000 * time.Hour)
	if st := p.State(); st.Fault.Mode != ModeMalformed || !st.ExpiresAt.IsZero() {
		t.Fatalf("state %+v", st)
	}
	if err := p.Set(Fault{Mode: ModeTimeout, TTL: -time.Second}); err == nil {
		t.Fatal("a negative ttl was accepted")
	}
}

// TestFaultTTLJSON: "ttl" reads as a Go duration; a written ttl of 0 or less, or a bad
// duration, is refused; an absent one is 0.
func TestFaultTTLJSON(t *testing.T) {
	tests := []struct {
		body    string
		ttl     time.Duration
		wantErr string
	}{
		{`{"mode":"timeout"}`, 0, ""},
		{`{"mode":"timeout","ttl":"90s"}`, 90 * time.Second, ""},
		{`{"mode":"timeout","ttl":"0s"}`, 0, "positive"},
		{`{"mode":"timeout","ttl":"-5m"}`, 0, "positive"},
		{`{"mode":"timeout","ttl":"soon"}`, 0, "ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var f Fault
			err := json.Unmarshal([]byte(tt.body), &f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || f.TTL != tt.ttl {
				t.Fatalf("ttl %v err %v, want %v", f.TTL, err, tt.ttl)
			}
			b, _ := json.Marshal(f)
			var back Fault
			if err := json.Unmarshal(b, &back); err != nil || back != f {
				t.Fatalf("round trip %s: %+v %v", b, back, err)
			}
		})
	}
}
