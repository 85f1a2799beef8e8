package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// maxFDTable bounds growFDTable: 65,536 descriptors, a table of 512 KiB of kernel memory.
const maxFDTable = 1 << 16

// growFDTable makes the kernel's table of this process's file descriptors hold as many as
// the soft limit on open files allows (at most maxFDTable) now, by duplicating a descriptor
// to the last number and closing it again, and returns that size. The kernel grows the table
// by doubling it as descriptors are opened, and in a process of several threads each growth
// waits for an RCU grace period (expand_fdtable): milliseconds to tens of them, during which
// the thread that opens the socket (an accept, a dial) waits, and the connections behind it.
// A run that opens thousands of connections would measure those waits at 256, 512, 1,024…
// descriptors in whichever process crosses them first, and a process only once: the
// table never shrinks.
func growFDTable() (int, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("grow the descriptor table: %w", err)
	}
	n := int(min(rl.Cur, maxFDTable))
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("grow the descriptor table: %w", err)
	}
	defer unix.Close(fd)
	if fd >= n-1 {
		return n, nil
	}
	if err := unix.Dup3(fd, n-1, unix.O_CLOEXEC); err != nil {
		return 0, fmt.Errorf("grow the descriptor table to %d: %w", n, err)
	}
	return n, unix.Close(n - 1)
}
