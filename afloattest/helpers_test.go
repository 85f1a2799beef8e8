package afloattest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing the test, so that a test
// can check that an assertion fails when it should. Its Fatalf ends the goroutine, as
// testing's does: run f with record, on a goroutine of its own.
type recorder struct {
	testing.TB // nil: a method the assertions do not use panics
	ctx        context.Context

	mu     sync.Mutex
	fatals []string
	errs   []string
}

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

// failed reports whether anything was recorded.
func (r *recorder) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fatals)+len(r.errs) > 0
}

// messages returns everything recorded, one failure a line.
func (r *recorder) messages() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(append(append([]string(nil), r.fatals...), r.errs...), "\n")
}

// record runs f with a recorder on a goroutine of its own and returns the recorder once f
// has returned or stopped at a Fatalf.
func record(t *testing.T, f func(tb testing.TB)) *recorder {
	t.Helper()
	r := &recorder{ctx: t.Context()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// wantFatal fails t unless r stopped at a Fatalf whose message holds every one of parts.
func wantFatal(t *testing.T, r *recorder, parts ...string) {
	t.Helper()
	r.mu.Lock()
	n := len(r.fatals)
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("want one Fatalf, got %d (%s)", n, r.messages())
	}
	msg := r.messages()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("failure message lacks %q:\n%s", p, msg)
		}
	}
}

// wantPass fails t if r recorded a failure.
func wantPass(t *testing.T, r *recorder) {
	t.Helper()
	if r.failed() {
		t.Fatalf("want no failure, got:\n%s", r.messages())
	}
}
