package redisstate

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/state"
)

// The Redis fixture (newFixture, replica, settle) is in breaker_test.go.

func killDoc() *flags.Document {
	pct := 30
	return &flags.Document{Kill: true, Tasks: map[string]flags.TaskFlags{
		"moderation": {Blocklist: []string{"acme", "globex"}, RolloutPct: &pct},
		"summarize":  {Kill: true},
	}}
}

func loadFlags(t *testing.T, s state.Store) (*flags.Document, uint64) {
	t.Helper()
	doc, v, err := s.LoadFlags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return doc, v
}

func loadFaults(t *testing.T, s state.Store) map[string]state.Fault {
	t.Helper()
	fs, err := s.LoadFaults(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func saveFault(t *testing.T, s state.Store, provider string, f state.Fault) {
	t.Helper()
	if err := s.SaveFault(context.Background(), provider, f); err != nil {
		t.Fatal(err)
	}
}

func sameFaults(t *testing.T, got, want map[string]state.Fault) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("faults %+v, want %+v", got, want)
	}
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			t.Errorf("fault of %s missing; got %+v", p, got)
			continue
		}
		if g.Fault != w.Fault || !g.Expires.Equal(w.Expires) || g.Expires.IsZero() != w.Expires.IsZero() {
			t.Errorf("fault of %s: got %+v, want %+v", p, g, w)
		}
	}
}

func TestStoreEmpty(t *testing.T) {
	f := newFixture(t)
	be, _ := f.replica(t)
	if doc, v := loadFlags(t, be); doc != nil || v != 0 {
		t.Errorf("LoadFlags of an empty store: %+v, version %d; want nil, 0", doc, v)
	}
	if fs := loadFaults(t, be); len(fs) != 0 {
		t.Errorf("LoadFaults of an empty store: %+v", fs)
	}
}

// TestStoreSwapFlags: a swap from the saved version makes version+1; a swap from any other
// version reports false and changes nothing; a nil document is refused.
func TestStoreSwapFlags(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	be, _ := f.replica(t)
	first := &flags.Document{Tasks: map[string]flags.TaskFlags{}}
	second := killDoc()
	steps := []struct {
		name    string
		version uint64
		doc     *flags.Document
		swapped bool
		want    *flags.Document
		wantV   uint64
	}{
		{"first save", 0, first, true, first, 1},
		{"stale 0 once saved", 0, second, false, first, 1},
		{"from the saved version", 1, second, true, second, 2},
		{"stale 1", 1, first, false, second, 2},
		{"a version not yet saved", 3, first, false, second, 2},
	}
	for _, st := range steps {
		ok, err := be.SwapFlags(ctx, st.version, st.doc)
		if err != nil || ok != st.swapped {
			t.Fatalf("%s: swapped %t, %v; want %t", st.name, ok, err, st.swapped)
		}
		doc, v := loadFlags(t, be)
		if v != st.wantV || !reflect.DeepEqual(doc, st.want) {
			t.Fatalf("%s: loaded %+v at version %d, want %+v at %d", st.name, doc, v, st.want, st.wantV)
		}
	}
	if _, err := be.SwapFlags(ctx, 2, nil); err == nil {
		t.Error("SwapFlags saved a nil document")
	}
	if doc, v := loadFlags(t, be); v != 2 || !reflect.DeepEqual(doc, second) {
		t.Errorf("after a refused nil document: %+v at version %d, want %+v at 2", doc, v, second)
	}
}

// TestStoreSwapFlagsConcurrent: of writers on several replicas that read the same version,
// exactly one wins, whether none was saved yet or one was.
func TestStoreSwapFlagsConcurrent(t *testing.T) {
	f := newFixture(t)
	var replicas []*Backend
	for range 4 {
		be, _ := f.replica(t)
		replicas = append(replicas, be)
	}
	const writers = 32
	for _, version := range []uint64{0, 1} {
		start := make(chan struct{})
		won := make(chan int, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				doc := &flags.Document{Tasks: map[string]flags.TaskFlags{"writer": {Blocklist: []string{string(rune('a' + i))}}}}
				<-start
				ok, err := replicas[i%len(replicas)].SwapFlags(context.Background(), version, doc)
				if err != nil {
					t.Error(err)
				}
				if ok {
					won <- i
				}
			})
		}
		close(start)
		wg.Wait()
		close(won)
		var winners []int
		for i := range won {
			winners = append(winners, i)
		}
		if len(winners) != 1 {
			t.Fatalf("from version %d: %d writers won (%v), want exactly one", version, len(winners), winners)
		}
		doc, v := loadFlags(t, replicas[0])
		if v != version+1 || doc.Tasks["writer"].Blocklist[0] != string(rune('a'+winners[0])) {
			t.Fatalf("from version %d: loaded %+v at version %d, want writer %d's at %d", version, doc, v, winners[0], version+1)
		}
	}
}

// TestStoreFaults: faults are saved by provider, replaced, and removed by the zero Fault;
// every field reads back, Expires to the millisecond.
func TestStoreFaults(t *testing.T) {
	f := newFixture(t)
	a, _ := f.replica(t)
	b, _ := f.replica(t)
	expires := time.Date(2031, 5, 17, 9, 30, 12, 345_678_901, time.UTC)
	saved := map[string]state.Fault{
		"openai":    {Fault: fault.Fault{Mode: fault.ModeUnavailable, Status: 529, TTL: 15 * time.Minute}, Expires: expires},
		"anthropic": {Fault: fault.Fault{Mode: fault.ModeSlow, Delay: 700 * time.Millisecond}},
		"gigachat":  {Fault: fault.Fault{Mode: fault.ModeTimeout, TTL: 90 * time.Second}, Expires: expires.Add(-time.Hour)},
		"yandex":    {Fault: fault.Fault{Mode: fault.ModeMalformed}},
	}
	want := map[string]state.Fault{}
	for p, ft := range saved {
		saveFault(t, a, p, ft)
		ft.Expires = ft.Expires.Truncate(time.Millisecond)
		want[p] = ft
	}
	sameFaults(t, loadFaults(t, b), want)
	if got := loadFaults(t, b)["openai"].Expires; !got.Equal(time.Date(2031, 5, 17, 9, 30, 12, 345_000_000, time.UTC)) {
		t.Errorf("Expires read back as %v, want it to the millisecond", got)
	}

	replaced := state.Fault{Fault: fault.Fault{Mode: fault.ModeUnavailable, Status: 429, TTL: time.Minute}, Expires: time.UnixMilli(1_900_000_000_123)}
	saveFault(t, b, "openai", replaced)
	saveFault(t, a, "anthropic", state.Fault{})
	saveFault(t, a, "never-saved", state.Fault{})
	want["openai"] = replaced
	delete(want, "anthropic")
	sameFaults(t, loadFaults(t, a), want)
}

// TestStoreWatch: a write of the flags or of a fault through one replica runs the Watch
// callback of the others, and of the writer; a callback whose ctx ended no longer runs.
func TestStoreWatch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, _ := f.replica(t)
	b, _ := f.replica(t)
	watch := func(be *Backend) (chan struct{}, context.CancelFunc) {
		ch := make(chan struct{}, 16)
		wctx, cancel := context.WithCancel(ctx)
		be.Watch(wctx, func() { ch <- struct{}{} })
		f.settle(t, be) // the callbacks of the subscription itself have run
		for len(ch) > 0 {
			<-ch
		}
		return ch, cancel
	}
	changedA, _ := watch(a)
	changedB, stopB := watch(b)
	wait := func(what string, ch chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the Watch callback did not run within 5s", what)
		}
	}

	if ok, err := a.SwapFlags(ctx, 0, killDoc()); err != nil || !ok {
		t.Fatalf("SwapFlags: %t, %v", ok, err)
	}
	wait("flags swapped on the other replica", changedB)
	wait("flags swapped on this replica", changedA)
	if doc, v := loadFlags(t, b); v != 1 || !reflect.DeepEqual(doc, killDoc()) {
		t.Errorf("the other replica loads %+v at version %d", doc, v)
	}

	saveFault(t, a, "openai", state.Fault{Fault: fault.Fault{Mode: fault.ModeTimeout}})
	wait("fault saved", changedB)
	saveFault(t, a, "openai", state.Fault{})
	wait("fault removed", changedB)

	if ok, err := b.SwapFlags(ctx, 1, &flags.Document{}); err != nil || !ok {
		t.Fatalf("SwapFlags: %t, %v", ok, err)
	}
	wait("flags swapped on b, seen by a", changedA)
	wait("flags swapped on b, seen by b", changedB)

	stopB()
	if ok, err := a.SwapFlags(ctx, 2, killDoc()); err != nil || !ok {
		t.Fatalf("SwapFlags: %t, %v", ok, err)
	}
	f.settle(t, b) // b has handled the push of that swap
	select {
	case <-changedB:
		t.Error("the callback ran after its ctx ended")
	default:
	}
}

// sameCanaries compares decisions field by field, At by time.Time.Equal.
func sameCanaries(t *testing.T, got, want map[string]state.Canary) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("canaries %+v, want %+v", got, want)
	}
	for task, w := range want {
		g, ok := got[task]
		if !ok {
			t.Errorf("canary of %s missing; got %+v", task, got)
			continue
		}
		if !g.At.Equal(w.At) {
			t.Errorf("canary of %s: at %v, want %v", task, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("canary of %s: got %+v, want %+v", task, g, w)
		}
	}
}

// TestStoreCanaries: a decision saved through one replica reads back on another, every
// field; a later one of the task replaces it; each save runs the Watch callback of the
// other replica.
func TestStoreCanaries(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, _ := f.replica(t)
	b, _ := f.replica(t)
	changedB := make(chan struct{}, 16)
	b.Watch(ctx, func() { changedB <- struct{}{} })
	f.settle(t, b)
	for len(changedB) > 0 {
		<-changedB
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-changedB:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the Watch callback of the other replica did not run within 5s", what)
		}
	}
	if got, err := b.LoadCanaries(ctx); err != nil || len(got) != 0 {
		t.Fatalf("LoadCanaries of an empty store: %+v, %v", got, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 123_456_789, time.UTC)
	rolled := state.Canary{Task: "triage", Fingerprint: "f1", State: "rolled_back", At: at, By: "auto", Reasons: []string{"error rate", "p95 latency"}}
	other := state.Canary{Task: "summary", Fingerprint: "f9", State: "promoted", At: at, By: "ops"}
	for _, c := range []state.Canary{rolled, other} {
		if err := a.SaveCanary(ctx, c); err != nil {
			t.Fatal(err)
		}
		wait("canary of " + c.Task + " saved")
	}
	loaded, err := b.LoadCanaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCanaries(t, loaded, map[string]state.Canary{"triage": rolled, "summary": other})

	promoted := state.Canary{Task: "triage", Fingerprint: "f2", State: "promoted", At: at.Add(time.Hour), By: "ops"}
	if err := a.SaveCanary(ctx, promoted); err != nil {
		t.Fatal(err)
	}
	wait("canary replaced")
	if loaded, err = b.LoadCanaries(ctx); err != nil {
		t.Fatal(err)
	}
	sameCanaries(t, loaded, map[string]state.Canary{"triage": promoted, "summary": other})

	// Another replica's later decision of the same canary (fingerprint): the first stands.
	late := state.Canary{Task: "triage", Fingerprint: "f2", State: "rolled_back", At: at.Add(2 * time.Hour), By: "late"}
	if err := b.SaveCanary(ctx, late); err != nil {
		t.Fatal(err)
	}
	if loaded, err = a.LoadCanaries(ctx); err != nil {
		t.Fatal(err)
	}
	sameCanaries(t, loaded, map[string]state.Canary{"triage": promoted, "summary": other})
}

// TestStateCanariesAcrossReplicas: a State's decision is in force on the State of another
// replica over the same Redis once it hears of the change, and on a State started later.
func TestStateCanariesAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	newState := func() *state.State {
		t.Helper()
		be, _ := f.replica(t)
		st, err := state.New(ctx, state.Options{Kind: "redis", Store: be, Flags: flags.NewMemory()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() }) // before the fixture's: a Backend closes twice
		return st
	}
	a, b := newState(), newState()
	c := state.Canary{Task: "triage", Fingerprint: "f1", State: "rolled_back", At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), By: "auto", Reasons: []string{"error rate"}}
	if err := a.SaveCanary(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := a.Canaries()["triage"]; got.Fingerprint != "f1" {
		t.Errorf("the writer's State: %+v, want the decision at once", got)
	}
	eventually(t, "the other replica's State loads the decision", func() bool {
		got := b.Canaries()["triage"]
		return got.Fingerprint == "f1" && got.State == "rolled_back" && got.At.Equal(c.At) && len(got.Reasons) == 1
	})
	if got := newState().Canaries()["triage"]; got.Fingerprint != "f1" {
		t.Errorf("a State started later: %+v, want the decision", got)
	}
}

func sameDrill(t *testing.T, what string, got, want *state.Drill) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Errorf("%s: got %+v, want %+v", what, got, want)
		return
	}
	if got == nil {
		return
	}
	g, w := *got, *want
	if !g.StartedAt.Equal(w.StartedAt) || !g.FinishedAt.Equal(w.FinishedAt) {
		t.Errorf("%s: times %v–%v, want %v–%v", what, g.StartedAt, g.FinishedAt, w.StartedAt, w.FinishedAt)
	}
	g.StartedAt, g.FinishedAt, w.StartedAt, w.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: got %+v, want %+v", what, g, w)
	}
}

// TestStoreDrills: a drill saved through one replica reads back on another, every field
// (through the save script's cjson round trip); a scope keeps its last drill and its last
// passing one, a failed drill replacing only the first; each save runs the Watch callback of
// the other replica.
func TestStoreDrills(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, _ := f.replica(t)
	b, _ := f.replica(t)
	changedB := make(chan struct{}, 16)
	b.Watch(ctx, func() { changedB <- struct{}{} })
	f.settle(t, b)
	for len(changedB) > 0 {
		<-changedB
	}
	if got, err := b.LoadDrills(ctx); err != nil || len(got) != 0 {
		t.Fatalf("LoadDrills of an empty store: %+v, %v", got, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 123_456_789, time.UTC)
	pass := state.Drill{Scope: "task:triage", Provider: "self-hosted/qwen", Mode: "unavailable", Passed: true, StartedAt: at, FinishedAt: at.Add(time.Minute)}
	fail := state.Drill{Scope: "task:triage", Provider: "primary", Mode: "stream_cut", Failed: []string{"fail_fast", "breaker_opened"}, StartedAt: at.Add(time.Hour), FinishedAt: at.Add(time.Hour + 90*time.Second)}
	route := state.Drill{Scope: "route:chat", Provider: "backup", Mode: "slow", Passed: true, StartedAt: at, FinishedAt: at.Add(time.Second)}
	for _, d := range []state.Drill{pass, fail, route} {
		if err := a.SaveDrill(ctx, d); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changedB:
		case <-time.After(5 * time.Second):
			t.Fatalf("drill of %s saved: the Watch callback of the other replica did not run within 5s", d.Scope)
		}
	}
	got, err := b.LoadDrills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("LoadDrills: %+v, want the scopes task:triage and route:chat", got)
	}
	sameDrill(t, "triage, last", got["task:triage"].Last, &fail)
	sameDrill(t, "triage, last passed", got["task:triage"].LastPassed, &pass)
	sameDrill(t, "chat, last", got["route:chat"].Last, &route)
	sameDrill(t, "chat, last passed", got["route:chat"].LastPassed, &route)

	// A drill that passes later replaces both.
	again := state.Drill{Scope: "task:triage", Provider: "primary", Mode: "timeout", Passed: true, StartedAt: at.Add(2 * time.Hour), FinishedAt: at.Add(2*time.Hour + time.Minute)}
	if err := b.SaveDrill(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, err = a.LoadDrills(ctx); err != nil {
		t.Fatal(err)
	}
	sameDrill(t, "triage, last, after a pass", got["task:triage"].Last, &again)
	sameDrill(t, "triage, last passed, after a pass", got["task:triage"].LastPassed, &again)
}

// TestStateDrillsAcrossReplicas: a drill a State records is shown by the State of another
// replica over the same Redis once it hears of the change, and by a State started later.
func TestStateDrillsAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	newState := func() *state.State {
		t.Helper()
		be, _ := f.replica(t)
		st, err := state.New(ctx, state.Options{Kind: "redis", Store: be, Flags: flags.NewMemory()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() }) // before the fixture's: a Backend closes twice
		return st
	}
	a, b := newState(), newState()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	d := state.Drill{Scope: "task:triage", Provider: "primary", Mode: "flap", Passed: true, StartedAt: at, FinishedAt: at.Add(time.Minute)}
	if err := a.SaveDrill(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := a.Drills()["task:triage"]; got.LastPassed == nil || got.LastPassed.Mode != "flap" {
		t.Errorf("the writer's State: %+v, want the drill at once", got)
	}
	eventually(t, "the other replica's State loads the drill", func() bool {
		got := b.Drills()["task:triage"]
		return got.LastPassed != nil && got.LastPassed.Mode == "flap" && got.LastPassed.FinishedAt.Equal(d.FinishedAt)
	})
	if got := newState().Drills()["task:triage"]; got.Last == nil || got.Last.Mode != "flap" {
		t.Errorf("a State started later: %+v, want the drill", got)
	}
}
