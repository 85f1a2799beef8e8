package main

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinToBindsEveryThread pins the test process to one CPU and reads every thread's mask
// back, then puts the process's mask and Ps back as they were.
func TestPinToBindsEveryThread(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	before, cpu := lastCPU(t)
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		if err := bindThreads(&before); err != nil {
			t.Errorf("restore the mask: %v", err)
		}
		runtime.GOMAXPROCS(procs)
	})
	if err := pinTo(cpu); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS = %d after pinTo, want 1", got)
	}
	requireThreadsOn(t, "self", cpu)
}

// TestHopProcessIsPinned starts a hop's process with hopCPU set (as -pin does) and reads
// the mask of each of its threads.
func TestHopProcessIsPinned(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	_, cpu := lastCPU(t)
	hopCPU = strconv.Itoa(cpu)
	t.Cleanup(func() { hopCPU = "" })
	c, err := startChild("proxy", "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	requireThreadsOn(t, strconv.Itoa(c.Pid()), cpu)
}

// requireThreadsOn checks that every thread of process pid ("self" for this one) may run on
// CPU cpu alone.
func requireThreadsOn(t *testing.T, pid string, cpu int) {
	t.Helper()
	dir := "/proc/" + pid + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) == 0 {
		t.Fatalf("%s lists no thread", dir)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		var got unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &got); err != nil {
			continue // the thread ended
		}
		if got.Count() != 1 || !got.IsSet(cpu) {
			t.Errorf("thread %d of process %s may run on %d CPUs (CPU %d among them: %v), want CPU %d alone", tid, pid, got.Count(), cpu, got.IsSet(cpu), cpu)
		}
	}
}

// lastCPU returns this process's CPU mask and the last CPU in it (not CPU 0, the one -pin
// gives the bench process, where the mask has another).
func lastCPU(t *testing.T) (unix.CPUSet, int) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := range 1024 {
		if set.IsSet(c) {
			cpu = c
		}
	}
	return set, cpu
}
