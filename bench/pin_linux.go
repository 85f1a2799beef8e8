package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinTo binds every thread of this process to CPU cpu and gives the Go runtime one P.
func pinTo(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := bindThreads(&set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// bindThreads sets the CPU mask of every thread of this process. A thread started later
// inherits the mask of the thread that started it, so once a pass over /proc/self/task finds
// no thread it has not bound, every thread is bound.
func bindThreads(set *unix.CPUSet) error {
	bound := map[int]bool{}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || bound[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			bound[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}
