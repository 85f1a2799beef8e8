package review

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/telemetry"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"modernc.org/sqlite"
)

// fillPending queues n pending items of task straight into the table, in one statement (one
// transaction): a long queue in seconds, not through n synced Enqueues. They were queued
// before t0, one nanosecond apart.
func fillPending(tb testing.TB, s *SQLite, task string, n int) {
	tb.Helper()
	if n == 0 {
		return
	}
	_, err := s.db.Exec(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
		INSERT INTO items (id, task, tenant, input, attempts, prompt_versions, status, created_ns)
		SELECT printf('rv_fill%010d', i), ?, 'acme', '{"text":"filled"}', '[]', '[]', 'pending', ? + i FROM seq`,
		n, task, t0.Add(-time.Hour).UnixNano())
	if err != nil {
		tb.Fatal(err)
	}
}

// enqueueMany queues n items, one Enqueue after another.
func enqueueMany(tb testing.TB, s *SQLite, n int) {
	tb.Helper()
	for i := range n {
		if _, err := s.Enqueue(context.Background(), modItem("acme", strconv.Itoa(i))); err != nil {
			tb.Fatal(err)
		}
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

// pagesRead is how many pages the store's one connection has fetched from its page cache so
// far, hits and misses (sqlite3_db_status): the work of its statements, however fast the
// machine.
func pagesRead(tb testing.TB, s *SQLite) int {
	tb.Helper()
	conn, err := s.db.Conn(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	var n int
	err = conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("the driver's connection %T has no sqlite3_db_status", dc)
		}
		for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
			cur, _, err := st.Status(op, false)
			if err != nil {
				return err
			}
			n += cur
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestSQLiteEnqueueDoesNotCountTheQueue: the depth metric's refresh after a commit reads an
// index, not the queue, so an Enqueue reads about as many pages with 50,000 items pending as
// with none: a deeper B-tree's extra level or two, where counting the pending items (as the
// refresh once did, on the store's one connection, 10x slower and more at this depth) reads
// hundreds. Pages, not time: the figure is the same on a busy machine.
func TestSQLiteEnqueueDoesNotCountTheQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a queue of 50,000 items")
	}
	const n = 40
	pages := map[int]int{}
	for _, pending := range []int{0, 50_000} {
		m, err := telemetry.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"), Options{Metrics: m, unsynced: true})
		fillPending(t, s, "moderation", pending)
		if _, err := s.Enqueue(context.Background(), modItem("acme", "first")); err != nil {
			t.Fatal(err)
		}
		before := pagesRead(t, s)
		enqueueMany(t, s, n)
		pages[pending] = (pagesRead(t, s) - before) / n
		if got, want := testutil.ToFloat64(m.ReviewQueueDepth.WithLabelValues("moderation")), float64(pending+n+1); got != want {
			t.Errorf("%d pending: depth %v, want %v", pending, got, want)
		}
		if pending > 0 && m.ReviewOldestPending.Age("moderation") < time.Hour-time.Second {
			t.Errorf("%d pending: oldest age %v, want the filled items' (over an hour)", pending, m.ReviewOldestPending.Age("moderation"))
		}
	}
	if pages[0] == 0 {
		t.Fatal("an Enqueue read no page: the counters do not count")
	}
	if pages[50_000] > 2*pages[0]+8 {
		t.Errorf("an Enqueue read %d pages with 50,000 items pending, %d with none: the commit path reads the queue", pages[50_000], pages[0])
	}
	t.Logf("pages read by an Enqueue: %d with none pending, %d with 50,000", pages[0], pages[50_000])
}

// BenchmarkEnqueuePending is one caller's Enqueues, one after another (each its own synced
// commit), behind a queue of 0, 100k and 1M pending items, with the metrics on (the depth
// refresh after each commit is what a long queue could slow). It reports the p50 and p99 of
// one Enqueue.
//
//	go test -run '^$' -bench EnqueuePending -benchtime 2000x ./review/
func BenchmarkEnqueuePending(b *testing.B) {
	for _, pending := range []int{0, 100_000, 1_000_000} {
		b.Run(strconv.Itoa(pending), func(b *testing.B) {
			m, err := telemetry.New(nil)
			if err != nil {
				b.Fatal(err)
			}
			s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "afloat.db"), Options{Metrics: m})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fillPending(b, s, "moderation", pending)
			ctx := context.Background()
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				if _, err := s.Enqueue(ctx, modItem("acme", strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				i++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(quantile(lat, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(quantile(lat, 0.99).Microseconds())/1000, "p99-ms")
		})
	}
}
