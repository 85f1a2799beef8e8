//go:build !linux

package main

import "errors"

// cpuQuota is Linux's only (cgroups).
type cpuQuota struct{ cores float64 }

func newCPUQuota(float64) (*cpuQuota, error) {
	return nil, errors.New("a CPU quota needs Linux's cgroups")
}

func (*cpuQuota) add(int) error { return errors.New("a CPU quota needs Linux's cgroups") }
func (*cpuQuota) close() error  { return nil }
