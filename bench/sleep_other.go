//go:build !linux

package main

import "time"

// precisely does nothing outside Linux: sleeps are Go timers.
func precisely() {}

// sleep sleeps for d, at most 10 ms at a time.
func sleep(d time.Duration) { time.Sleep(min(d, 10*time.Millisecond)) }
