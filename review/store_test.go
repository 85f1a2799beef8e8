package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/telemetry"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// opener opens one kind of store with opts; every store kind runs the same tests.
type opener struct {
	name string
	open func(t *testing.T, opts Options) Store
}

func openers() []opener {
	return []opener{
		{"memory", func(t *testing.T, opts Options) Store { return NewMemoryWith(opts) }},
		{"sqlite", func(t *testing.T, opts Options) Store {
			// These tests check behaviour, not durability (sqlite_test.go and the kill -9 test
			// of cmd/afloat do): commits skip the disk flush, which a busy disk makes slow.
			opts.unsynced = true
			return openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), opts)
		}},
		// A schema of its own in AFLOAT_POSTGRES_URL's database; skips when it is unset.
		{"postgres", func(t *testing.T, opts Options) Store { return openPostgresSchema(t, opts) }},
	}
}

func openSQLite(t *testing.T, path string, opts Options) *SQLite {
	t.Helper()
	s, err := OpenSQLite(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func eachStore(t *testing.T, fn func(t *testing.T, o opener)) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) { fn(t, o) })
	}
}

func enqueue(t *testing.T, s Queue, it *Item) string {
	t.Helper()
	id, err := s.Enqueue(context.Background(), it)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func modItem(tenant, text string) *Item {
	return &Item{Task: "moderation", Tenant: tenant, Input: json.RawMessage(`{"text":"` + text + `"}`),
		Attempts: []afloat.Attempt{
			{Provider: "primary", Tier: 0, Outcome: afloat.OutcomeUnavailable, Latency: 120 * time.Millisecond, PromptVersion: "moderation/primary/v1", Error: "503 from upstream"},
			{Provider: "backup", Tier: 1, Outcome: afloat.OutcomeCircuitOpen},
		},
		PromptVersions: []string{"moderation/primary/v1", "moderation/backup/v2"}}
}

func TestStoreEnqueueGet(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk})
		in := modItem("acme", "hello")
		id := enqueue(t, s, in)
		if !strings.HasPrefix(id, "rv_") || len(id) != 29 {
			t.Fatalf("id %q", id)
		}
		it, err := s.Get(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if it.ID != id || it.Status != StatusPending || it.Task != "moderation" || it.Tenant != "acme" ||
			!it.CreatedAt.Equal(t0) || string(it.Input) != `{"text":"hello"}` ||
			!slices.Equal(it.PromptVersions, in.PromptVersions) || !slices.Equal(it.Attempts, in.Attempts) ||
			it.Operator != "" || !it.ClaimedAt.IsZero() || !it.ResolvedAt.IsZero() || it.Result != nil {
			t.Fatalf("item %+v", it)
		}
		for _, tc := range []struct{ name, tenant, id string }{
			{"another tenant", "globex", id},
			{"the empty tenant", "", id},
			{"unknown id", "acme", "rv_01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		} {
			if _, err := s.Get(ctx, tc.tenant, tc.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: got %v, want ErrNotFound", tc.name, err)
			}
		}
		if it, err := s.Lookup(ctx, id); err != nil || it.Tenant != "acme" {
			t.Errorf("lookup: %+v, %v", it, err)
		}
		if _, err := s.Enqueue(ctx, &Item{Tenant: "acme"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("item without a task: %v, want ErrInvalid", err)
		}
	})
}

func TestStoreIdempotencyKey(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk})
		keyed := func(tenant, task, key string) *Item {
			it := modItem(tenant, "x")
			it.Task, it.IdempotencyKey = task, key
			return it
		}
		first := enqueue(t, s, keyed("acme", "moderation", "k1"))
		clk.Advance(time.Second)
		tests := []struct {
			name string
			item *Item
			same bool
		}{
			{"same tenant, task and key", keyed("acme", "moderation", "k1"), true},
			{"another key", keyed("acme", "moderation", "k2"), false},
			{"another tenant", keyed("globex", "moderation", "k1"), false},
			{"another task", keyed("acme", "gate", "k1"), false},
			{"no key", keyed("acme", "moderation", ""), false},
		}
		for _, tc := range tests {
			id := enqueue(t, s, tc.item)
			if (id == first) != tc.same {
				t.Errorf("%s: id %s, first %s, want same=%v", tc.name, id, first, tc.same)
			}
		}
		page, err := s.List(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 5 {
			t.Errorf("%d items, want 5: the repeated key queued once", len(page.Items))
		}
	})
}

// step is one operation of a transition test and what it must give.
type step struct {
	op       string // claim, resolve, reject
	operator string
	arg      string // result or reason
	status   Status // the item's status after, when the step succeeds
	err      error  // ErrConflict, ErrInvalid, ErrNotFound or nil
}

func TestStoreTransitions(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"claim then resolve", []step{
			{op: "claim", operator: "alice", status: StatusClaimed},
			{op: "resolve", operator: "alice", arg: `{"allowed": false}`, status: StatusResolved},
		}},
		{"resolving a pending item claims it", []step{
			{op: "resolve", operator: "bob", arg: `{"allowed":true}`, status: StatusResolved},
		}},
		{"rejecting a pending item claims it", []step{
			{op: "reject", operator: "bob", arg: "spam, nothing to moderate", status: StatusRejected},
		}},
		{"another operator's claim is a conflict", []step{
			{op: "claim", operator: "alice", status: StatusClaimed},
			{op: "claim", operator: "bob", err: ErrConflict},
			{op: "resolve", operator: "bob", arg: `{"allowed":true}`, err: ErrConflict},
			{op: "reject", operator: "bob", arg: "no", err: ErrConflict},
		}},
		{"claiming again renews", []step{
			{op: "claim", operator: "alice", status: StatusClaimed},
			{op: "claim", operator: "alice", status: StatusClaimed},
		}},
		{"a resolved item takes no change", []step{
			{op: "resolve", operator: "alice", arg: `{"allowed":true}`, status: StatusResolved},
			{op: "resolve", operator: "alice", arg: `{"allowed":false}`, err: ErrConflict},
			{op: "claim", operator: "bob", err: ErrConflict},
			{op: "reject", operator: "alice", arg: "late", err: ErrConflict},
		}},
		{"a rejected item takes no resolve", []step{
			{op: "reject", operator: "alice", arg: "not reviewable", status: StatusRejected},
			{op: "resolve", operator: "alice", arg: `{"allowed":true}`, err: ErrConflict},
		}},
		{"bad arguments change nothing", []step{
			{op: "claim", operator: "", err: ErrInvalid},
			{op: "reject", operator: "alice", arg: "", err: ErrInvalid},
			{op: "resolve", operator: "alice", arg: `{"allowed":`, err: ErrInvalid},
			{op: "claim", operator: "bob", status: StatusClaimed},
		}},
	}
	eachStore(t, func(t *testing.T, o opener) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				clk := clockwork.NewFakeClockAt(t0)
				s := o.open(t, Options{Clock: clk})
				id := enqueue(t, s, modItem("acme", "x"))
				for i, st := range tc.steps {
					clk.Advance(time.Minute)
					it, err := apply(ctx, s, id, st)
					if st.err != nil {
						if !errors.Is(err, st.err) {
							t.Fatalf("step %d %s by %q: err %v, want %v", i, st.op, st.operator, err, st.err)
						}
						continue
					}
					if err != nil {
						t.Fatalf("step %d %s by %q: %v", i, st.op, st.operator, err)
					}
					got, err := s.Lookup(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					for _, v := range []*Item{it, got} {
						if v.Status != st.status || v.Operator != st.operator {
							t.Fatalf("step %d: item %s by %q, want %s by %q", i, v.Status, v.Operator, st.status, st.operator)
						}
						switch st.op {
						case "resolve":
							if string(v.Result) != compact(st.arg) || !v.ResolvedAt.Equal(clk.Now()) || v.ClaimedAt.IsZero() {
								t.Fatalf("step %d: resolved item %+v", i, v)
							}
						case "reject":
							if v.Reason != st.arg || !v.ResolvedAt.Equal(clk.Now()) || v.Result != nil {
								t.Fatalf("step %d: rejected item %+v", i, v)
							}
						}
					}
				}
			})
		}
	})
}

func compact(s string) string {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	b, _ := json.Marshal(v)
	return string(b)
}

func apply(ctx context.Context, s Store, id string, st step) (*Item, error) {
	switch st.op {
	case "claim":
		return s.Claim(ctx, id, st.operator)
	case "resolve":
		return s.Resolve(ctx, id, st.operator, json.RawMessage(st.arg))
	case "reject":
		return s.Reject(ctx, id, st.operator, st.arg)
	}
	return nil, fmt.Errorf("unknown op %s", st.op)
}

func TestStoreUnknownID(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		s := o.open(t, Options{Clock: clockwork.NewFakeClockAt(t0)})
		for _, op := range []string{"claim", "resolve", "reject"} {
			_, err := apply(context.Background(), s, "rv_nope", step{op: op, operator: "alice", arg: `{"allowed":true}`})
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s of an unknown id: %v, want ErrNotFound", op, err)
			}
		}
	})
}

// TestClaimsLapse: a claim older than the claim TTL reads as pending and another operator
// can take the item; until then the conflict says who holds it and until when.
func TestClaimsLapse(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk, ClaimTTL: 10 * time.Minute})
		id := enqueue(t, s, modItem("acme", "x"))
		it, err := s.Claim(ctx, id, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(10 * time.Minute); !it.ClaimExpiresAt.Equal(want) {
			t.Fatalf("claim expires %v, want %v", it.ClaimExpiresAt, want)
		}
		clk.Advance(9*time.Minute + 59*time.Second)
		_, err = s.Claim(ctx, id, "bob")
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Operator != "alice" || ce.Status != StatusClaimed || !ce.Until.Equal(t0.Add(10*time.Minute)) {
			t.Fatalf("claim by bob before the lapse: %v", err)
		}
		if !strings.Contains(err.Error(), "claimed by alice until 2026-11-29T10:10:00Z") {
			t.Errorf("conflict message %q", err)
		}
		assertCounts(t, s, map[Status]int{StatusClaimed: 1, StatusPending: 0})

		clk.Advance(time.Second)
		got, err := s.Get(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusPending || got.Operator != "" {
			t.Fatalf("after the lapse: %s by %q, want pending", got.Status, got.Operator)
		}
		assertCounts(t, s, map[Status]int{StatusClaimed: 0, StatusPending: 1})
		stats, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st := stats["moderation"]; st.Pending != 1 || st.Claimed != 0 {
			t.Fatalf("stats %+v, want 1 pending", st)
		}
		if it, err = s.Claim(ctx, id, "bob"); err != nil || it.Operator != "bob" {
			t.Fatalf("claim by bob after the lapse: %+v, %v", it, err)
		}
		// A resolve clears the expiry: an answered item never lapses.
		if it, err = s.Resolve(ctx, id, "bob", json.RawMessage(`{"allowed":true}`)); err != nil || !it.ClaimExpiresAt.IsZero() {
			t.Fatalf("resolve: %+v, %v", it, err)
		}
		clk.Advance(time.Hour)
		if got, _ := s.Lookup(ctx, id); got.Status != StatusResolved || got.Operator != "bob" {
			t.Fatalf("resolved item later: %s by %q", got.Status, got.Operator)
		}
	})
}

func assertCounts(t *testing.T, s Store, want map[Status]int) {
	t.Helper()
	for st, n := range want {
		page, err := s.List(context.Background(), Filter{Status: st})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != n {
			t.Errorf("%d items %s, want %d", len(page.Items), st, n)
		}
		for _, it := range page.Items {
			if it.Status != st {
				t.Errorf("list %s returned a %s item", st, it.Status)
			}
		}
	}
}

// TestConcurrentClaims: four operators race to claim the same 100 items, each in its own
// order: every item goes to exactly one of them.
func TestConcurrentClaims(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		s := o.open(t, Options{Clock: clockwork.NewFakeClockAt(t0), ClaimTTL: time.Hour})
		var ids []string
		for i := range 100 {
			ids = append(ids, enqueue(t, s, modItem("acme", fmt.Sprint(i))))
		}
		operators := []string{"alice", "bob", "carol", "dave"}
		won := make([][]string, len(operators))
		errs := make(chan error, len(operators))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, op := range operators {
			wg.Go(func() {
				order := slices.Clone(ids)
				rand.New(rand.NewPCG(uint64(i), 7)).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
				<-start
				for _, id := range order {
					it, err := s.Claim(ctx, id, op)
					switch {
					case err == nil:
						if it.Operator != op {
							errs <- fmt.Errorf("%s won %s but it is %s's", op, id, it.Operator)
							return
						}
						won[i] = append(won[i], id)
					case !errors.Is(err, ErrConflict):
						errs <- fmt.Errorf("%s claiming %s: %v", op, id, err)
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		owner := map[string]string{}
		for i, list := range won {
			for _, id := range list {
				if prev, ok := owner[id]; ok {
					t.Fatalf("%s claimed by both %s and %s", id, prev, operators[i])
				}
				owner[id] = operators[i]
			}
		}
		if len(owner) != len(ids) {
			t.Fatalf("%d items claimed, want %d", len(owner), len(ids))
		}
		for _, id := range ids {
			it, err := s.Lookup(ctx, id)
			if err != nil || it.Status != StatusClaimed || it.Operator != owner[id] {
				t.Fatalf("%s: %+v, %v; winner %s", id, it, err, owner[id])
			}
		}
	})
}

func TestListFilterAndPages(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk})
		var all []string
		for i := range 7 {
			it := modItem("acme", fmt.Sprint(i))
			if i%3 == 2 {
				it.Task = "gate"
			}
			all = append(all, enqueue(t, s, it))
			if i != 3 { // two items share a creation time: the id orders them
				clk.Advance(time.Second)
			}
		}
		must(t)(s.Claim(ctx, all[0], "alice"))
		must(t)(s.Resolve(ctx, all[1], "alice", json.RawMessage(`{"allowed":true}`)))
		must(t)(s.Reject(ctx, all[2], "bob", "dup"))

		var paged []string
		cursor := ""
		for range 10 {
			page, err := s.List(ctx, Filter{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				paged = append(paged, it.ID)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if !slices.Equal(paged, orderOf(t, s, all)) || len(paged) != 7 {
			t.Fatalf("pages gave %v, want every item once in queue order %v", paged, all)
		}

		tests := []struct {
			name string
			f    Filter
			want []string
		}{
			{"pending", Filter{Status: StatusPending}, []string{all[3], all[4], all[5], all[6]}},
			{"claimed", Filter{Status: StatusClaimed}, []string{all[0]}},
			{"resolved", Filter{Status: StatusResolved}, []string{all[1]}},
			{"rejected", Filter{Status: StatusRejected}, []string{all[2]}},
			{"task", Filter{Task: "gate"}, []string{all[2], all[5]}},
			{"task and status", Filter{Task: "gate", Status: StatusPending}, []string{all[5]}},
			{"unknown task", Filter{Task: "nope"}, nil},
		}
		for _, tc := range tests {
			page, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got []string
			for _, it := range page.Items {
				got = append(got, it.ID)
			}
			if !sameSet(got, tc.want) || page.Next != "" {
				t.Errorf("%s: %v (next %q), want %v", tc.name, got, page.Next, tc.want)
			}
		}
		for _, f := range []Filter{{Status: "open"}, {Cursor: "not-a-cursor"}} {
			if _, err := s.List(ctx, f); !errors.Is(err, ErrInvalid) {
				t.Errorf("filter %+v: %v, want ErrInvalid", f, err)
			}
		}
	})
}

// orderOf returns ids sorted as List must return them: by creation time, then id.
func orderOf(t *testing.T, s Store, ids []string) []string {
	t.Helper()
	type key struct {
		at time.Time
		id string
	}
	var keys []key
	for _, id := range ids {
		it, err := s.Lookup(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key{it.CreatedAt, id})
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.id
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// must fails the test when the call that returned an item failed.
func must(t *testing.T) func(*Item, error) {
	return func(_ *Item, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetention: answered items older than the retention are purged, counted by task; items
// not answered are never purged, however old.
func TestRetention(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		m, err := telemetry.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		s := o.open(t, Options{Clock: clk, Retention: 24 * time.Hour, PurgeEvery: time.Hour, Metrics: m})
		resolved := enqueue(t, s, modItem("acme", "a"))
		rejected := enqueue(t, s, modItem("acme", "b"))
		pending := enqueue(t, s, modItem("acme", "c"))
		claimed := enqueue(t, s, modItem("acme", "d"))
		must(t)(s.Resolve(ctx, resolved, "alice", json.RawMessage(`{"allowed":true}`)))
		clk.Advance(2 * time.Hour)
		must(t)(s.Reject(ctx, rejected, "alice", "dup"))
		must(t)(s.Claim(ctx, claimed, "bob"))

		clk.Advance(23 * time.Hour) // the resolve is 25h old, the reject 23h
		purger := s.(interface {
			Purge(context.Context) (int, error)
		})
		if n, err := purger.Purge(ctx); err != nil || n != 1 {
			t.Fatalf("purge: %d, %v; want 1", n, err)
		}
		if _, err := s.Lookup(ctx, resolved); !errors.Is(err, ErrNotFound) {
			t.Fatalf("resolved item after retention: %v", err)
		}
		// The next purge rides on a write once PurgeEvery has passed.
		clk.Advance(59 * time.Minute)
		enqueue(t, s, modItem("acme", "e"))
		if _, err := s.Lookup(ctx, rejected); err != nil {
			t.Fatalf("rejected item purged before its purge was due: %v", err)
		}
		clk.Advance(2 * time.Minute)
		enqueue(t, s, modItem("acme", "f"))
		if _, err := s.Lookup(ctx, rejected); !errors.Is(err, ErrNotFound) {
			t.Fatalf("rejected item after retention and a write: %v", err)
		}
		for _, id := range []string{pending, claimed} {
			if _, err := s.Lookup(ctx, id); err != nil {
				t.Fatalf("unanswered item %s purged: %v", id, err)
			}
		}
		if got := testutil.ToFloat64(m.ReviewPurged.WithLabelValues("moderation")); got != 2 {
			t.Errorf("afloat_review_purged_total %v, want 2", got)
		}
	})
}

// TestMetrics: queued, resolved and rejected items are counted; the depth and the oldest
// unanswered item's age follow the queue.
func TestMetrics(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		m, err := telemetry.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		m.InitTask("moderation", nil, nil, nil)
		s := o.open(t, Options{Clock: clk, Metrics: m})
		a := enqueue(t, s, modItem("acme", "a"))
		clk.Advance(time.Minute)
		b := enqueue(t, s, modItem("acme", "b"))
		enqueue(t, s, modItem("acme", "c"))
		must(t)(s.Claim(ctx, b, "alice"))
		clk.Advance(4 * time.Minute)
		check := func(when string, enq, res, rej, depth float64, age time.Duration) {
			t.Helper()
			got := []float64{
				testutil.ToFloat64(m.ReviewEnqueued.WithLabelValues("moderation")),
				testutil.ToFloat64(m.ReviewResolved.WithLabelValues("moderation")),
				testutil.ToFloat64(m.ReviewRejected.WithLabelValues("moderation")),
				testutil.ToFloat64(m.ReviewQueueDepth.WithLabelValues("moderation")),
			}
			if want := []float64{enq, res, rej, depth}; !slices.Equal(got, want) {
				t.Errorf("%s: enqueued, resolved, rejected, depth %v, want %v", when, got, want)
			}
			if got := m.ReviewOldestPending.Age("moderation"); got != age {
				t.Errorf("%s: oldest age %v, want %v", when, got, age)
			}
		}
		check("three queued", 3, 0, 0, 3, 5*time.Minute)
		must(t)(s.Resolve(ctx, a, "alice", json.RawMessage(`{"allowed":true}`)))
		check("the oldest resolved", 3, 1, 0, 2, 4*time.Minute)
		must(t)(s.Reject(ctx, b, "alice", "dup"))
		check("one rejected", 3, 1, 1, 1, 4*time.Minute)
		if got := testutil.ToFloat64(m.ReviewStoreHealthy); got != 1 {
			t.Errorf("afloat_review_store_healthy %v, want 1", got)
		}
	})
}

// dueIDs returns the ids DueDeliveries gives at now, in its order.
func dueIDs(t *testing.T, s Store, now time.Time, limit int) []string {
	t.Helper()
	items, err := s.DueDeliveries(context.Background(), now, limit)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, it := range items {
		if !it.Answered() || it.Delivery.State != DeliveryPending || it.Delivery.NextAt.After(now) {
			t.Errorf("due item %s is %s with delivery %+v at %v", it.ID, it.Status, it.Delivery, now)
		}
		ids = append(ids, it.ID)
	}
	return ids
}

// TestStoreOutboxOff: without Options.Outbox an answer queues no delivery.
func TestStoreOutboxOff(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk})
		a, b := enqueue(t, s, modItem("acme", "a")), enqueue(t, s, modItem("acme", "b"))
		resolved, err := s.Resolve(ctx, a, "alice", json.RawMessage(`{"allowed":true}`))
		if err != nil {
			t.Fatal(err)
		}
		rejected, err := s.Reject(ctx, b, "alice", "spam")
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range []*Item{resolved, rejected} {
			got, err := s.Lookup(ctx, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			if it.Delivery != (Delivery{}) || got.Delivery != (Delivery{}) {
				t.Errorf("%s: delivery %+v, stored %+v; want none", it.Status, it.Delivery, got.Delivery)
			}
		}
		if ids := dueIDs(t, s, t0.Add(time.Hour), 10); len(ids) != 0 {
			t.Errorf("due deliveries %v, want none", ids)
		}
	})
}

// TestStoreOutboxDeliveries: with Options.Outbox, resolving and rejecting queue a pending
// delivery due at once, in the same change; DueDeliveries returns the due ones, oldest due
// first, up to its limit; RecordDelivery replaces the delivery (a retry later, delivered,
// failed), and refuses an item not answered or unknown.
func TestStoreOutboxDeliveries(t *testing.T) {
	eachStore(t, func(t *testing.T, o opener) {
		ctx := context.Background()
		clk := clockwork.NewFakeClockAt(t0)
		s := o.open(t, Options{Clock: clk, Outbox: true})
		keyed := modItem("acme", "a")
		keyed.Delivery = Delivery{State: DeliveryDelivered, Attempts: 3} // the caller's: ignored
		a := enqueue(t, s, keyed)
		b, c, d := enqueue(t, s, modItem("acme", "b")), enqueue(t, s, modItem("acme", "c")), enqueue(t, s, modItem("globex", "d"))
		if got, _ := s.Lookup(ctx, a); got.Delivery != (Delivery{}) {
			t.Fatalf("a queued item has delivery %+v", got.Delivery)
		}
		if ids := dueIDs(t, s, t0, 10); len(ids) != 0 {
			t.Fatalf("due before any answer: %v", ids)
		}

		t1 := t0.Add(time.Minute)
		clk.Advance(time.Minute)
		ra, err := s.Resolve(ctx, a, "alice", json.RawMessage(`{"allowed": true}`))
		if err != nil {
			t.Fatal(err)
		}
		t2 := t1.Add(time.Minute)
		clk.Advance(time.Minute)
		rb, err := s.Reject(ctx, b, "bob", "spam")
		if err != nil {
			t.Fatal(err)
		}
		must(t)(s.Claim(ctx, c, "carol"))
		for _, tc := range []struct {
			it *Item
			at time.Time
		}{{ra, t1}, {rb, t2}} {
			want := Delivery{State: DeliveryPending, NextAt: tc.at}
			got, err := s.Lookup(ctx, tc.it.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !sameDelivery(tc.it.Delivery, want) || !sameDelivery(got.Delivery, want) {
				t.Errorf("%s item: delivery %+v, stored %+v; want %+v", tc.it.Status, tc.it.Delivery, got.Delivery, want)
			}
		}
		page, err := s.List(ctx, Filter{Status: StatusResolved})
		if err != nil || len(page.Items) != 1 || page.Items[0].Delivery.State != DeliveryPending {
			t.Fatalf("list resolved: %+v, %v; want a with its delivery", page, err)
		}

		for _, tc := range []struct {
			name  string
			now   time.Time
			limit int
			want  []string
		}{
			{"before the first answer", t0, 10, []string{}},
			{"at the first answer", t1, 10, []string{a}},
			{"at the second", t2, 10, []string{a, b}},
			{"limit", t2, 1, []string{a}},
			{"later", t2.Add(time.Hour), 10, []string{a, b}},
		} {
			if got := dueIDs(t, s, tc.now, tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
			}
		}

		// a's first attempt failed: retried in a minute, after b, which is due since t2.
		retry := Delivery{State: DeliveryPending, Attempts: 1, LastAttempt: t2, LastStatus: 500,
			LastError: "Internal Server Error", NextAt: t2.Add(time.Minute)}
		if err := s.RecordDelivery(ctx, a, retry); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Lookup(ctx, a); !sameDelivery(got.Delivery, retry) {
			t.Errorf("recorded retry: %+v, want %+v", got.Delivery, retry)
		}
		if got := dueIDs(t, s, t2, 10); !slices.Equal(got, []string{b}) {
			t.Errorf("due with a's retry later: %v, want [b]", got)
		}
		if got := dueIDs(t, s, t2.Add(time.Minute), 10); !slices.Equal(got, []string{b, a}) {
			t.Errorf("due once a's retry is: %v, want [b a] (oldest due first)", got)
		}

		delivered := Delivery{State: DeliveryDelivered, Attempts: 1, LastAttempt: t2, LastStatus: 204}
		if err := s.RecordDelivery(ctx, b, delivered); err != nil {
			t.Fatal(err)
		}
		failed := Delivery{State: DeliveryFailed, Attempts: 2, LastAttempt: t2.Add(time.Minute), LastStatus: 400, LastError: "Bad Request"}
		if err := s.RecordDelivery(ctx, a, failed); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]Delivery{a: failed, b: delivered} {
			if got, _ := s.Lookup(ctx, id); !sameDelivery(got.Delivery, want) {
				t.Errorf("%s: delivery %+v, want %+v", id, got.Delivery, want)
			}
		}
		if got := dueIDs(t, s, t2.Add(24*time.Hour), 10); len(got) != 0 {
			t.Errorf("due after delivered and failed: %v, want none", got)
		}

		for _, tc := range []struct {
			name string
			id   string
			d    Delivery
			err  error
		}{
			{"a claimed item", c, delivered, ErrConflict},
			{"a pending item", d, delivered, ErrConflict},
			{"an unknown item", "rv_01ZZZZZZZZZZZZZZZZZZZZZZZZ", delivered, ErrNotFound},
			{"no state", a, Delivery{Attempts: 1}, ErrInvalid},
			{"an unknown state", a, Delivery{State: "lost"}, ErrInvalid},
		} {
			if err := s.RecordDelivery(ctx, tc.id, tc.d); !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
		}
		if got, _ := s.Lookup(ctx, c); got.Status != StatusClaimed || got.Delivery != (Delivery{}) {
			t.Errorf("a refused record changed the claimed item: %+v", got)
		}
		if got, _ := s.Lookup(ctx, a); !sameDelivery(got.Delivery, failed) {
			t.Errorf("a refused record changed a: %+v", got.Delivery)
		}
	})
}

// sameDelivery compares deliveries by instant, whatever the time zone a store reads back.
func sameDelivery(a, b Delivery) bool {
	return a.State == b.State && a.Attempts == b.Attempts && a.LastAttempt.Equal(b.LastAttempt) &&
		a.LastStatus == b.LastStatus && a.LastError == b.LastError && a.NextAt.Equal(b.NextAt)
}
