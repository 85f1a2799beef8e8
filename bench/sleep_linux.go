package main

import (
	"runtime"
	"syscall"
	"time"
)

// precisely prepares the calling goroutine to sleep with precise wake-ups: Go's timers wake
// up to a millisecond late when the process is idle (the network poller waits in
// milliseconds), which an open loop would count as latency of every target. The goroutine
// takes an OS thread of its own with the least timer slack the kernel allows; its sleeps
// then wake within tens of microseconds. The goroutine must never unlock the thread: the
// thread then ends with it instead of going back to the runtime with its slack changed.
func precisely() {
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, 29 /* PR_SET_TIMERSLACK */, 1, 0)
}

// sleep sleeps for d on the calling thread (nanosleep), at most 10 ms at a time so that
// the caller can check for cancellation in between.
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(min(d, 10*time.Millisecond)))
	_ = syscall.Nanosleep(&ts, nil)
}
