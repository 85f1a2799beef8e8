package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/provider/sim"
	"github.com/afloat-dev/afloat/state"
	"github.com/jonboulle/clockwork"
)

// watched is a shared Memory store that tells every State over it of a change, as Redis's
// pub/sub does: changed() is called by the test.
type watched struct {
	*state.Memory
	fns []func()
}

func (w *watched) Watch(_ context.Context, changed func()) { w.fns = append(w.fns, changed) }

func (w *watched) changed() {
	for _, fn := range w.fns {
		fn()
	}
}

// replica is one gateway's flags and fault wrapper over the store.
type replica struct {
	st     *state.State
	mem    *flags.Memory
	faults map[string]*fault.Provider
}

func newReplica(t *testing.T, store state.Store, clk clockwork.Clock) *replica {
	t.Helper()
	p, err := sim.New(sim.Config{Name: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	pct := 30
	mem := flags.NewMemory()
	if err := mem.Set(context.Background(), &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: &pct}}}); err != nil {
		t.Fatal(err)
	}
	r := &replica{mem: mem, faults: map[string]*fault.Provider{"primary": fault.Wrap("primary", p, clk)}}
	st, err := state.New(context.Background(), state.Options{Kind: "test", Store: store, Flags: mem, Faults: r.faults, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r.st = st
	return r
}

func (r *replica) doc(t *testing.T) *flags.Document {
	t.Helper()
	d, err := r.st.Flags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStateFlags: a write goes to the store and is in force at once; a task the saved
// document omits keeps the config's flags; another replica over the same store puts the
// write in force when the store tells it of the change.
func TestStateFlags(t *testing.T) {
	ctx := context.Background()
	store := &watched{Memory: state.NewMemory()}
	a, b := newReplica(t, store, nil), newReplica(t, store, nil)
	if got := a.doc(t).Tasks["triage"].Rollout(); got != 30 {
		t.Fatalf("rollout %d before any write, want the config's 30", got)
	}
	if err := a.st.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"moderation": {Kill: true}}}); err != nil {
		t.Fatal(err)
	}
	if d := a.doc(t); !d.Tasks["moderation"].Kill || d.Tasks["triage"].Rollout() != 30 {
		t.Errorf("after Set: %+v, want moderation killed and triage at the config's 30", d.Tasks)
	}
	if b.doc(t).Tasks["moderation"].Kill {
		t.Fatal("replica b saw the write before the store told it")
	}
	store.changed()
	if !b.doc(t).Tasks["moderation"].Kill {
		t.Error("replica b did not put the write in force after the change")
	}
	// Update reads the store, not b's memory: a PATCH on b merges into a's write.
	d, err := b.st.Update(ctx, func(cur *flags.Document) (*flags.Document, error) {
		next := &flags.Document{Kill: cur.Kill, Tasks: map[string]flags.TaskFlags{}}
		for k, v := range cur.Tasks {
			next.Tasks[k] = v
		}
		next.Tasks["triage"] = flags.TaskFlags{Blocklist: []string{"t1"}}
		return next, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Tasks["moderation"].Kill || len(d.Tasks["triage"].Blocklist) != 1 {
		t.Errorf("Update answered %+v, want both writes", d.Tasks)
	}
	if _, err := b.st.Update(ctx, func(*flags.Document) (*flags.Document, error) {
		bad := 150
		return &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: &bad}}}, nil
	}); err == nil {
		t.Error("an invalid document was saved")
	}
}

// racing is a store whose every LoadFlags is followed by another writer's swap, lost times.
type racing struct {
	*state.Memory
	lost int
}

func (r *racing) LoadFlags(ctx context.Context) (*flags.Document, uint64, error) {
	d, v, err := r.Memory.LoadFlags(ctx)
	if r.lost > 0 {
		r.lost--
		_, _ = r.Memory.SwapFlags(ctx, v, &flags.Document{Tasks: map[string]flags.TaskFlags{"other": {Kill: true}}})
	}
	return d, v, err
}

// TestStateUpdateRetries: an Update that loses the compare-and-swap to another writer runs
// again on what that writer saved, and gives up after many losses.
func TestStateUpdateRetries(t *testing.T) {
	ctx := context.Background()
	store := &racing{Memory: state.NewMemory(), lost: 2}
	r := newReplica(t, store, nil)
	store.lost = 2
	runs := 0
	d, err := r.st.Update(ctx, func(cur *flags.Document) (*flags.Document, error) {
		runs++
		next := &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}}
		for k, v := range cur.Tasks {
			if k != "triage" {
				next.Tasks[k] = v
			}
		}
		return next, nil
	})
	if err != nil || runs != 3 || !d.Tasks["triage"].Kill || !d.Tasks["other"].Kill {
		t.Errorf("Update: %v after %d runs, %+v; want 3 runs and both writes", err, runs, d)
	}
	store.lost = 1000
	if _, err := r.st.Update(ctx, func(cur *flags.Document) (*flags.Document, error) { return cur, nil }); err == nil {
		t.Error("an Update that always loses succeeded")
	}
}

// TestStateFaults: a fault is saved with its TTL as an absolute expiry, in force here at
// once and on another replica after the change, and clears itself at that time everywhere.
func TestStateFaults(t *testing.T) {
	ctx := context.Background()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	store := &watched{Memory: state.NewMemory()}
	a, b := newReplica(t, store, clk), newReplica(t, store, clk)
	if err := a.st.SetFault(ctx, "primary", fault.Fault{Mode: fault.ModeUnavailable, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := a.faults["primary"].State(); got.Fault.Mode != fault.ModeUnavailable || !got.ExpiresAt.Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("replica a: %+v", got)
	}
	store.changed()
	if got := b.faults["primary"].State(); got.Fault.Mode != fault.ModeUnavailable || !got.ExpiresAt.Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("replica b after the change: %+v, want the same fault and expiry", got)
	}
	clk.Advance(time.Minute)
	if a.faults["primary"].Fault().Mode != fault.ModeNone || b.faults["primary"].Fault().Mode != fault.ModeNone {
		t.Error("the fault outlived its TTL")
	}
	// A restart (a new State over the store) does not bring an expired fault back.
	c := newReplica(t, store, clk)
	if c.faults["primary"].Fault().Mode != fault.ModeNone {
		t.Error("a new replica put an expired fault in force")
	}
	if err := a.st.SetFault(ctx, "nobody", fault.Fault{Mode: fault.ModeTimeout}); err == nil {
		t.Error("a fault of an unknown provider was set")
	}
}

// TestStateDrills: a saved drill is the scope's last; a passing one is also its last passing
// one, which a failed drill after it does not replace.
func TestStateDrills(t *testing.T) {
	ctx := context.Background()
	store := &watched{Memory: state.NewMemory()}
	a, b := newReplica(t, store, nil), newReplica(t, store, nil)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pass := state.Drill{Scope: "task:triage", Provider: "primary", Mode: "unavailable", Passed: true, StartedAt: at, FinishedAt: at.Add(time.Minute)}
	fail := pass
	fail.Passed, fail.Failed, fail.FinishedAt = false, []string{"fail_fast"}, at.Add(2*time.Hour)
	for _, d := range []state.Drill{pass, fail} {
		if err := a.st.SaveDrill(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	store.changed()
	for name, r := range map[string]*replica{"a": a, "b": b} {
		ds := r.st.Drills()["task:triage"]
		if ds.Last == nil || ds.Last.Passed || ds.LastPassed == nil || !ds.LastPassed.FinishedAt.Equal(pass.FinishedAt) {
			t.Errorf("replica %s: drills %+v, want the failed one last and the passing one kept", name, ds)
		}
	}
}

// broken is a store that cannot answer.
type broken struct{ *state.Memory }

var errDown = errors.New("store down")

func (broken) LoadFlags(context.Context) (*flags.Document, uint64, error) { return nil, 0, errDown }

// TestStateStoreDown: a store that cannot answer at start leaves the config's flags in
// force, and a write fails rather than change this process alone.
func TestStateStoreDown(t *testing.T) {
	ctx := context.Background()
	mem := flags.NewMemory()
	st, err := state.New(ctx, state.Options{Store: broken{state.NewMemory()}, Flags: mem})
	if !errors.Is(err, errDown) || st == nil {
		t.Fatalf("New: %v, %v; want the store's error and a usable State", st, err)
	}
	if err := st.Set(ctx, &flags.Document{Kill: true}); !errors.Is(err, errDown) {
		t.Errorf("Set: %v, want the store's error", err)
	}
	if d, _ := st.Flags(ctx); d.Kill {
		t.Error("a failed write changed the flags in force")
	}
}

// resettable is a watched store that can lose everything, as a Redis restarted empty does.
type resettable struct {
	watched
}

func (r *resettable) lose() { r.Memory = state.NewMemory() }

// TestStateStoreLostItsData: when the store comes back empty, the replicas keep the flags in
// force and save them again, and a later write applies on every replica, though the store
// numbers its versions anew.
func TestStateStoreLostItsData(t *testing.T) {
	ctx := context.Background()
	store := &resettable{watched{Memory: state.NewMemory()}}
	a, b := newReplica(t, store, nil), newReplica(t, store, nil)
	if err := a.st.Set(ctx, &flags.Document{Kill: true}); err != nil {
		t.Fatal(err)
	}
	store.changed()
	store.lose()
	store.changed() // the replicas reconnect
	if !a.doc(t).Kill || !b.doc(t).Kill {
		t.Fatal("a replica dropped the kill switch when the store lost it")
	}
	if saved, _, _ := store.LoadFlags(ctx); saved == nil || !saved.Kill {
		t.Fatalf("the store holds %+v, want the kill switch saved again", saved)
	}
	if err := b.st.Set(ctx, &flags.Document{Kill: false}); err != nil {
		t.Fatal(err)
	}
	store.changed()
	if a.doc(t).Kill || b.doc(t).Kill {
		t.Error("the kill switch cleared after the loss did not apply on every replica")
	}
}

// TestStateRetarget: a config reload's Retarget makes its flags the defaults (in force at
// once while nothing was saved; under the saved ones after) and its providers the ones the
// saved faults go to.
func TestStateRetarget(t *testing.T) {
	ctx := context.Background()
	clk := clockwork.NewFakeClock()
	store := state.NewMemory()
	r := newReplica(t, store, clk)
	pct := func(n int) *int { return &n }
	defaults := &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: pct(60)}, "summary": {RolloutPct: pct(10)}}}
	p, err := sim.New(sim.Config{Name: "backup"})
	if err != nil {
		t.Fatal(err)
	}
	faults := map[string]*fault.Provider{"primary": r.faults["primary"], "backup": fault.Wrap("backup", p, clk)}
	if err := r.st.Retarget(ctx, defaults, faults); err != nil {
		t.Fatal(err)
	}
	if d := r.doc(t); d.Tasks["triage"].Rollout() != 60 || d.Tasks["summary"].Rollout() != 10 {
		t.Fatalf("nothing saved: the new defaults are not in force: %+v", d.Tasks)
	}
	if err := r.st.SetFault(ctx, "backup", fault.Fault{Mode: fault.ModeTimeout}); err != nil {
		t.Fatalf("a provider the reload added: %v", err)
	}
	if err := r.st.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}}); err != nil {
		t.Fatal(err)
	}
	more := &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {RolloutPct: pct(5)}, "digest": {RolloutPct: pct(20)}}}
	if err := r.st.Retarget(ctx, more, faults); err != nil {
		t.Fatal(err)
	}
	if d := r.doc(t); !d.Tasks["triage"].Kill || d.Tasks["digest"].Rollout() != 20 {
		t.Fatalf("flags saved: they stay over the new defaults, which fill the rest: %+v", d.Tasks)
	}
	if faults["backup"].Fault().Mode != fault.ModeTimeout {
		t.Fatal("the saved fault is not in force on the provider after Retarget")
	}
}

// TestStateCanaries: a canary's decision is in force here at once and on another replica
// after the change; a later decision of the task replaces it; a restart loads them.
func TestStateCanaries(t *testing.T) {
	ctx := context.Background()
	store := &watched{Memory: state.NewMemory()}
	a, b := newReplica(t, store, nil), newReplica(t, store, nil)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rolled := state.Canary{Task: "triage", Fingerprint: "f1", State: "rolled_back", At: at, By: "auto", Reasons: []string{"error rate 12% > 5%"}}
	promoted := state.Canary{Task: "triage", Fingerprint: "f2", State: "promoted", At: at.Add(time.Hour), By: "ops"}
	other := state.Canary{Task: "summary", Fingerprint: "f9", State: "promoted", At: at, By: "auto"}
	for _, c := range []state.Canary{rolled, other} {
		if err := a.st.SaveCanary(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.st.Canaries()["triage"]; got.State != "rolled_back" || got.Fingerprint != "f1" || len(got.Reasons) != 1 {
		t.Errorf("replica a after its save: %+v, want the rollback", got)
	}
	if _, ok := b.st.Canaries()["triage"]; ok {
		t.Fatal("replica b saw the decision before the store told it")
	}
	store.changed()
	if got := b.st.Canaries(); len(got) != 2 || got["triage"].State != "rolled_back" || got["summary"].State != "promoted" {
		t.Errorf("replica b after the change: %+v, want both decisions", got)
	}
	if err := b.st.SaveCanary(ctx, promoted); err != nil {
		t.Fatal(err)
	}
	store.changed()
	c := newReplica(t, store, nil) // a restart
	for name, r := range map[string]*replica{"a": a, "b": b, "c": c} {
		got := r.st.Canaries()
		if tr := got["triage"]; len(got) != 2 || tr.State != "promoted" || tr.Fingerprint != "f2" || tr.By != "ops" || !tr.At.Equal(promoted.At) || len(tr.Reasons) != 0 {
			t.Errorf("replica %s: %+v, want the promotion to have replaced the rollback", name, got)
		}
	}
}

// TestMemoryCanaries: a Memory keeps one decision per task, the last saved, and what it
// returns is a copy.
func TestMemoryCanaries(t *testing.T) {
	ctx := context.Background()
	m := state.NewMemory()
	if got, err := m.LoadCanaries(ctx); err != nil || len(got) != 0 {
		t.Fatalf("an empty Memory: %+v, %v", got, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []state.Canary{
		{Task: "triage", Fingerprint: "f1", State: "rolled_back", At: at, By: "auto", Reasons: []string{"p95 latency"}},
		{Task: "triage", Fingerprint: "f2", State: "promoted", At: at.Add(time.Minute), By: "ops"},
		{Task: "summary", Fingerprint: "f3", State: "promoted", At: at, By: "auto"},
	} {
		if err := m.SaveCanary(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.LoadCanaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["triage"].Fingerprint != "f2" || got["summary"].Fingerprint != "f3" {
		t.Fatalf("LoadCanaries: %+v, want triage's last and summary's", got)
	}
	// The first decision of a canary (a fingerprint) stands: another replica's, later, does not replace it.
	if err := m.SaveCanary(ctx, state.Canary{Task: "triage", Fingerprint: "f2", State: "rolled_back", By: "late"}); err != nil {
		t.Fatal(err)
	}
	if kept, _ := m.LoadCanaries(ctx); kept["triage"].State != "promoted" || kept["triage"].By != "ops" {
		t.Fatalf("a second decision of the same canary replaced the first: %+v", kept["triage"])
	}
	delete(got, "triage")
	if again, _ := m.LoadCanaries(ctx); len(again) != 2 {
		t.Error("modifying the returned map changed the Memory")
	}
}
