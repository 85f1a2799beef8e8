package main

import (
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrowFDTable grows this process's descriptor table and reads its size back from
// /proc/self/status (FDSize: the slots the kernel has allocated).
func TestGrowFDTable(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	want := int(min(rl.Cur, maxFDTable))
	n, err := growFDTable()
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("growFDTable() = %d, want %d (the soft limit %d, at most %d)", n, want, rl.Cur, maxFDTable)
	}
	if got := statusKB("self", "FDSize:"); got < uint64(n) {
		t.Errorf("FDSize %d after growFDTable, want at least %d", got, n)
	}
}

// TestHopProcessGrowsItsFDTable starts a hop's process as the benchmarks do, and again as
// -grow-fds=false does, and reads the size of each one's descriptor table.
func TestHopProcessGrowsItsFDTable(t *testing.T) {
	fdSize := func(grow bool) uint64 {
		t.Helper()
		fdTable = grow
		t.Cleanup(func() { fdTable = true })
		c, err := startChild("proxy", "http://127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return statusKB(strconv.Itoa(c.Pid()), "FDSize:")
	}
	// A process that opened a few descriptors has a table of a few hundred slots at most.
	if grown, left := fdSize(true), fdSize(false); grown < 1024 || left >= grown {
		t.Errorf("FDSize of a hop's process: %d grown, %d left alone; want at least 1024 grown and fewer left alone", grown, left)
	}
}
