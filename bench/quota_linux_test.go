package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCPUQuotaHoldsAProcess makes a quota, moves a hop's process into it and reads back the
// quota and each of the process's threads' cgroup; the quota's effect on a gateway is the
// overload scenario's figure (its cores). It skips where no cgroup can be made (not root, no
// cpu controller): the scenario then runs without one and says so.
func TestCPUQuotaHoldsAProcess(t *testing.T) {
	q, err := newCPUQuota(0.25)
	if err != nil {
		t.Skipf("no CPU quota can be made here: %v", err)
	}
	t.Cleanup(func() {
		if err := q.close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := os.Stat(q.dir); !os.IsNotExist(err) {
			t.Errorf("the cgroup %s is still there after close (%v)", q.dir, err)
		}
	})
	want := map[string]string{"cpu.max": "25000 100000", "cpu.cfs_quota_us": "25000"}
	read := 0
	for file, v := range want {
		b, err := os.ReadFile(filepath.Join(q.dir, file))
		if err != nil {
			continue // the other version's file
		}
		read++
		if got := strings.TrimSpace(string(b)); got != v {
			t.Errorf("%s = %q, want %q", file, got, v)
		}
	}
	if read != 1 {
		t.Fatalf("read %d of cpu.max and cpu.cfs_quota_us in %s, want one", read, q.dir)
	}

	c, err := startChild("proxy", "http://127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := q.add(c.Pid()); err != nil {
		t.Fatal(err)
	}
	procs, err := q.procs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(procs, c.Pid()) {
		t.Errorf("cgroup.procs = %v, want it to hold %d", procs, c.Pid())
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(c.Pid()), "task"))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.Pid()), "task", task.Name(), "cgroup"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "/"+filepath.Base(q.dir)+"\n") {
			t.Errorf("thread %s is not in %s:\n%s", task.Name(), filepath.Base(q.dir), b)
		}
	}
}
