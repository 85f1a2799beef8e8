package sqlitestate

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/flags"
	"github.com/afloat-dev/afloat/provider/fault"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/state"
)

func openSQLite(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func swap(t *testing.T, s state.Store, version uint64, doc *flags.Document) bool {
	t.Helper()
	ok, err := s.SwapFlags(context.Background(), version, doc)
	if err != nil {
		t.Fatal(err)
	}
	return ok
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

func killDoc() *flags.Document {
	pct := 30
	return &flags.Document{Kill: true, Tasks: map[string]flags.TaskFlags{
		"moderation": {Blocklist: []string{"acme", "globex"}, RolloutPct: &pct},
		"summarize":  {Kill: true},
	}}
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

func TestSQLiteEmpty(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"))
	if doc, v := loadFlags(t, s); doc != nil || v != 0 {
		t.Errorf("LoadFlags of an empty store: %+v, version %d; want nil, 0", doc, v)
	}
	if fs := loadFaults(t, s); len(fs) != 0 {
		t.Errorf("LoadFaults of an empty store: %+v", fs)
	}
}

// TestSQLiteSwapFlags: a swap from the saved version makes version+1; a swap from any
// other version reports false and changes nothing.
func TestSQLiteSwapFlags(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"))
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
		if got := swap(t, s, st.version, st.doc); got != st.swapped {
			t.Fatalf("%s: swapped %v, want %v", st.name, got, st.swapped)
		}
		doc, v := loadFlags(t, s)
		if v != st.wantV || !reflect.DeepEqual(doc, st.want) {
			t.Fatalf("%s: loaded %+v at version %d, want %+v at %d", st.name, doc, v, st.want, st.wantV)
		}
	}
	if _, err := s.SwapFlags(context.Background(), 2, nil); err == nil {
		t.Error("SwapFlags saved a nil document")
	}
	if _, v := loadFlags(t, s); v != 2 {
		t.Errorf("version %d after a refused swap, want 2", v)
	}
}

// faults are one of each kind, with and without an expiry; the expiry has a part below the
// millisecond, which the store drops.
func faults() (saved, loaded map[string]state.Fault) {
	expires := time.Date(2031, 5, 17, 9, 30, 12, 345_678_901, time.UTC)
	saved = map[string]state.Fault{
		"openai":    {Fault: fault.Fault{Mode: fault.ModeUnavailable, Status: 529, TTL: 15 * time.Minute}, Expires: expires},
		"anthropic": {Fault: fault.Fault{Mode: fault.ModeSlow, Delay: 700 * time.Millisecond}},
		"gigachat":  {Fault: fault.Fault{Mode: fault.ModeTimeout, TTL: 90 * time.Second}, Expires: expires.Add(-time.Hour)},
	}
	loaded = map[string]state.Fault{}
	for p, f := range saved {
		f.Expires = f.Expires.Truncate(time.Millisecond)
		loaded[p] = f
	}
	return saved, loaded
}

// TestSQLiteReopen: the document, its version and every fault read back the same after the
// store is closed and opened again, each Expires to the millisecond.
func TestSQLiteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afloat.db")
	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	swap(t, s, 0, &flags.Document{})
	swap(t, s, 1, killDoc())
	saved, want := faults()
	for p, f := range saved {
		saveFault(t, s, p, f)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSQLite(t, path)
	if doc, v := loadFlags(t, s); v != 2 || !reflect.DeepEqual(doc, killDoc()) {
		t.Errorf("after reopen: %+v at version %d, want %+v at 2", doc, v, killDoc())
	}
	sameFaults(t, loadFaults(t, s), want)
	if !swap(t, s, 2, &flags.Document{}) {
		t.Error("a swap from the version saved before reopening failed")
	}
}

// TestSQLiteSurvivesKill: what a commit returned is in the files at once, as kill -9 leaves
// them: the database and its WAL, copied while the store is open, hold the kill switch.
func TestSQLiteSurvivesKill(t *testing.T) {
	src := t.TempDir()
	s := openSQLite(t, filepath.Join(src, "afloat.db"))
	swap(t, s, 0, killDoc())
	saved, want := faults()
	for p, f := range saved {
		saveFault(t, s, p, f)
	}
	dst := t.TempDir()
	copyFiles(t, src, dst)

	c := openSQLite(t, filepath.Join(dst, "afloat.db"))
	if doc, v := loadFlags(t, c); v != 1 || doc == nil || !doc.Kill {
		t.Errorf("after kill -9: %+v at version %d, want the kill switch at 1", doc, v)
	}
	sameFaults(t, loadFaults(t, c), want)
}

// TestSQLitePragmas: the file is in WAL mode and every commit is synced; the store keeps its
// schema version in its own table and leaves PRAGMA user_version to the review queue.
func TestSQLitePragmas(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	for range 2 { // a second open finds the tables current
		s, err := OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		var mode string
		if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("journal mode %q, %v; want wal", mode, err)
		}
		var sync int
		if err := s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
			t.Errorf("synchronous %d, %v; want 2 (FULL)", sync, err)
		}
		var user int
		if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&user); err != nil || user != 0 {
			t.Errorf("user_version %d, %v; want 0, the review queue's to set", user, err)
		}
		var version int
		if err := s.db.QueryRowContext(ctx, "SELECT version FROM state_schema").Scan(&version); err != nil || version != len(migrations) {
			t.Errorf("state schema version %d, %v; want %d", version, err, len(migrations))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSQLiteSaveFault(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"))
	expires := time.UnixMilli(1_900_000_000_123)
	saveFault(t, s, "openai", state.Fault{Fault: fault.Fault{Mode: fault.ModeTimeout}})
	saveFault(t, s, "backup", state.Fault{Fault: fault.Fault{Mode: fault.ModeMalformed}})
	saveFault(t, s, "openai", state.Fault{Fault: fault.Fault{Mode: fault.ModeUnavailable, Status: 429, TTL: time.Minute}, Expires: expires})
	sameFaults(t, loadFaults(t, s), map[string]state.Fault{
		"openai": {Fault: fault.Fault{Mode: fault.ModeUnavailable, Status: 429, TTL: time.Minute}, Expires: expires},
		"backup": {Fault: fault.Fault{Mode: fault.ModeMalformed}},
	})

	saveFault(t, s, "openai", state.Fault{})
	saveFault(t, s, "never-saved", state.Fault{})
	sameFaults(t, loadFaults(t, s), map[string]state.Fault{"backup": {Fault: fault.Fault{Mode: fault.ModeMalformed}}})
}

// TestSQLiteSwapFlagsConcurrent: of writers that read the same version, exactly one wins,
// whether none was saved yet or one was.
func TestSQLiteSwapFlagsConcurrent(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "afloat.db"))
	const writers = 32
	for _, version := range []uint64{0, 1} {
		start := make(chan struct{})
		won := make(chan int, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				doc := &flags.Document{Tasks: map[string]flags.TaskFlags{"writer": {Blocklist: []string{string(rune('a' + i))}}}}
				<-start
				ok, err := s.SwapFlags(context.Background(), version, doc)
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
		doc, v := loadFlags(t, s)
		if v != version+1 || doc.Tasks["writer"].Blocklist[0] != string(rune('a'+winners[0])) {
			t.Fatalf("from version %d: loaded %+v at version %d, want writer %d's at %d", version, doc, v, winners[0], version+1)
		}
	}
}

// TestSQLiteSharesFileWithReviewQueue: this store and the review queue open one file in
// either order, both write to it while both are open, and both open it again after closing,
// in the other order, with what each wrote.
func TestSQLiteSharesFileWithReviewQueue(t *testing.T) {
	ctx := context.Background()
	openReview := func(t *testing.T, path string) *review.SQLite {
		t.Helper()
		q, err := review.OpenSQLite(ctx, path, review.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	item := func(text string) *review.Item {
		return &review.Item{Task: "moderation", Tenant: "acme", Input: json.RawMessage(`{"text":"` + text + `"}`)}
	}
	for _, stateFirst := range []bool{true, false} {
		name := "review queue first"
		if stateFirst {
			name = "state first"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "afloat.db")
			open := func() (*SQLite, *review.SQLite) {
				t.Helper()
				if stateFirst {
					s := openSQLite(t, path)
					return s, openReview(t, path)
				}
				q := openReview(t, path)
				return openSQLite(t, path), q
			}
			s, q := open()
			var userVersion int
			if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&userVersion); err != nil || userVersion == 0 {
				t.Fatalf("user_version %d, %v; want the review queue's", userVersion, err)
			}
			first, err := q.Enqueue(ctx, item("one"))
			if err != nil {
				t.Fatal(err)
			}
			swap(t, s, 0, killDoc())
			second, err := q.Enqueue(ctx, item("two"))
			if err != nil {
				t.Fatal(err)
			}
			saveFault(t, s, "openai", state.Fault{Fault: fault.Fault{Mode: fault.ModeTimeout}})
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			stateFirst = !stateFirst
			s, q = open()
			defer q.Close()
			var after int
			if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&after); err != nil || after != userVersion {
				t.Errorf("user_version %d after reopening, %v; want %d", after, err, userVersion)
			}
			for _, id := range []string{first, second} {
				if _, err := q.Lookup(ctx, id); err != nil {
					t.Errorf("review item %s after reopening: %v", id, err)
				}
			}
			if doc, v := loadFlags(t, s); v != 1 || !reflect.DeepEqual(doc, killDoc()) {
				t.Errorf("after reopening: %+v at version %d, want the kill switch at 1", doc, v)
			}
			sameFaults(t, loadFaults(t, s), map[string]state.Fault{"openai": {Fault: fault.Fault{Mode: fault.ModeTimeout}}})
		})
	}
}

// TestSQLiteRefusesToOpen: a missing folder, a file that is not a database, a newer schema
// and bad paths fail at open with an error that names the file and says why.
func TestSQLiteRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	s := openSQLite(t, newer)
	if _, err := s.db.Exec("UPDATE state_schema SET version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	missing := filepath.Join(dir, "no", "such", "folder", "afloat.db")
	tests := []struct {
		name, path string
		want       []string
	}{
		{"folder missing", missing, []string{"state sqlite " + missing, "folder " + filepath.Dir(missing) + " does not exist"}},
		{"not a database", garbage, []string{"state sqlite " + garbage, "not a database"}},
		{"newer schema", newer, []string{"state sqlite " + newer, "schema version 99, newer than this build's"}},
		{"empty path", "", []string{"path is empty"}},
		{"question mark", filepath.Join(dir, "a?b.db"), []string{"holds a '?'"}},
	}
	for _, tc := range tests {
		s, err := OpenSQLite(tc.path)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", tc.name, err, w)
			}
		}
	}
}

// TestSQLiteRefusesReadOnlyStorage: on storage it cannot write, the store refuses to open,
// whether the folder is empty, the database was closed cleanly, or a kill -9 left its WAL:
// it never opens to lose the first kill switch saved.
func TestSQLiteRefusesReadOnlyStorage(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, dir string)
	}{
		{"no database yet", func(*testing.T, string) {}},
		{"closed cleanly", func(t *testing.T, dir string) {
			s, err := OpenSQLite(filepath.Join(dir, "afloat.db"))
			if err != nil {
				t.Fatal(err)
			}
			swap(t, s, 0, killDoc())
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "afloat.db-wal")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a clean close left a WAL: %v", err)
			}
		}},
		{"WAL left by kill -9", func(t *testing.T, dir string) {
			src := t.TempDir()
			s := openSQLite(t, filepath.Join(src, "afloat.db"))
			swap(t, s, 0, killDoc())
			copyFiles(t, src, dir)
			if fi, err := os.Stat(filepath.Join(dir, "afloat.db-wal")); err != nil || fi.Size() == 0 {
				t.Fatalf("no WAL to recover from: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(t, dir)
			readOnly(t, dir)
			path := filepath.Join(dir, "afloat.db")
			s, err := OpenSQLite(path)
			if err == nil {
				_, serr := s.SwapFlags(context.Background(), 1, &flags.Document{})
				s.Close()
				t.Fatalf("opened read-only storage (then SwapFlags: %v)", serr)
			}
			for _, w := range []string{"state sqlite " + path, "cannot write"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to say %q", err, w)
				}
			}
		})
	}
}

// readOnly makes dir and its files read-only until the test ends. Root ignores file modes,
// so as root on Linux it bind-mounts dir read-only on itself, and skips when it may not.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o444); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = os.Chmod(dir, 0o755)
			for _, e := range entries {
				_ = os.Chmod(filepath.Join(dir, e.Name()), 0o644)
			}
		})
		return
	}
	if runtime.GOOS != "linux" {
		t.Skipf("running as root, which ignores file modes, on %s", runtime.GOOS)
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("running as root, which ignores file modes, and cannot bind-mount %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "--lazy", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
	})
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("running as root and cannot remount %s read-only: %v: %s", dir, err, out)
	}
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Fatalf("%s is still writable", dir)
	}
}

// copyFiles copies the database and the files beside it from one folder to another, as
// kill -9 leaves them when no commit runs.
func copyFiles(t *testing.T, from, to string) {
	t.Helper()
	for _, name := range []string{"afloat.db", "afloat.db-wal", "afloat.db-shm"} {
		in, err := os.Open(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, name))
		if err != nil {
			in.Close()
			t.Fatal(err)
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSQLiteDrills: a scope keeps its last drill and its last passing one, across a reopen.
func TestSQLiteDrills(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	s := openSQLite(t, path)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pass := state.Drill{Scope: "task:triage", Provider: "primary", Mode: "unavailable", Passed: true, StartedAt: at, FinishedAt: at.Add(time.Minute)}
	fail := state.Drill{Scope: "task:triage", Provider: "primary", Mode: "timeout", Failed: []string{"fail_fast"}, StartedAt: at.Add(time.Hour), FinishedAt: at.Add(2 * time.Hour)}
	for _, d := range []state.Drill{pass, fail, {Scope: "route:chat", Provider: "backup", Mode: "slow", Passed: true, StartedAt: at, FinishedAt: at}} {
		if err := s.SaveDrill(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := openSQLite(t, path).LoadDrills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := got["task:triage"]
	if len(got) != 2 || tr.Last == nil || tr.Last.Mode != "timeout" || len(tr.Last.Failed) != 1 || tr.LastPassed == nil || !tr.LastPassed.FinishedAt.Equal(pass.FinishedAt) {
		t.Errorf("after reopen: %+v", got)
	}
}

// TestSQLiteCanaries: a task keeps its last canary decision, every field, across a reopen.
func TestSQLiteCanaries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	s := openSQLite(t, path)
	at := time.Date(2026, 12, 1, 10, 0, 0, 123_456_789, time.UTC)
	promoted := state.Canary{Task: "triage", Fingerprint: "f2", State: "promoted", At: at.Add(time.Hour), By: "ops", Reasons: []string{"manual"}}
	other := state.Canary{Task: "summary", Fingerprint: "f9", State: "rolled_back", At: at, By: "auto", Reasons: []string{"error rate", "p95 latency"}}
	for _, c := range []state.Canary{
		{Task: "triage", Fingerprint: "f1", State: "rolled_back", At: at, By: "auto", Reasons: []string{"error rate"}},
		other,
		promoted,
		// Another replica's later decision of the same canary: the first stands.
		{Task: "triage", Fingerprint: "f2", State: "rolled_back", At: at.Add(2 * time.Hour), By: "late"},
	} {
		if err := s.SaveCanary(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := openSQLite(t, path).LoadCanaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]state.Canary{"triage": promoted, "summary": other}
	if len(got) != len(want) {
		t.Fatalf("after reopen: %+v, want %+v", got, want)
	}
	for task, w := range want {
		g := got[task]
		if !g.At.Equal(w.At) {
			t.Errorf("canary of %s: at %v, want %v", task, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("canary of %s after reopen: %+v, want %+v", task, g, w)
		}
	}
}

// TestSQLiteMigrateCanaries: a file a build without canaries wrote (schema version 2) gets
// their table at open, and keeps its drills.
func TestSQLiteMigrateCanaries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "afloat.db")
	s := openSQLite(t, path)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := s.SaveDrill(ctx, state.Drill{Scope: "task:triage", Provider: "primary", Mode: "timeout", Passed: true, StartedAt: at, FinishedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "DROP TABLE state_canaries"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE state_schema SET version = 2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, path)
	var version int
	if err := s.db.QueryRowContext(ctx, "SELECT version FROM state_schema").Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("schema version %d after open, %v; want %d", version, err, len(migrations))
	}
	c := state.Canary{Task: "triage", Fingerprint: "f1", State: "promoted", At: at, By: "ops"}
	if err := s.SaveCanary(ctx, c); err != nil {
		t.Fatalf("a canary in a migrated file: %v", err)
	}
	if got, err := s.LoadCanaries(ctx); err != nil || got["triage"].Fingerprint != "f1" {
		t.Errorf("LoadCanaries of a migrated file: %+v, %v", got, err)
	}
	if ds, err := s.LoadDrills(ctx); err != nil || ds["task:triage"].LastPassed == nil {
		t.Errorf("the drills after migrating: %+v, %v", ds, err)
	}
}
