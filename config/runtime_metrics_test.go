package config

import (
	"runtime"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBuildRuntimeCollectors: the registry Build makes exports the Go runtime's and the
// process's metrics beside afloat's; a host's own registerer gets afloat's only, so that a
// host that registered them itself does not fail on a duplicate.
func TestBuildRuntimeCollectors(t *testing.T) {
	rt := buildTree(t, minimal, clockwork.NewFakeClock())
	want := []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds"}
	if runtime.GOOS == "linux" {
		// The process collector reads /proc: it has nothing to say elsewhere but Windows.
		want = append(want, "process_start_time_seconds", "process_resident_memory_bytes", "process_open_fds")
	}
	for _, name := range want {
		if n, err := testutil.GatherAndCount(rt.Registry, name); err != nil || n == 0 {
			t.Errorf("%s: %d series, %v", name, n, err)
		}
	}

	f := mustParse(t, minimal)
	reg := prometheus.NewRegistry()
	b := f.build(BuildOptions{Registerer: reg})
	t.Cleanup(func() { _ = b.rt.Close() })
	if n, _ := testutil.GatherAndCount(reg, "go_goroutines"); n != 0 {
		t.Errorf("go_goroutines on the host's registerer: %d series, want none", n)
	}
}
