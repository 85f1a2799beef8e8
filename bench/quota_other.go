//go:build !linux

package main

import "errors"

// cpuQuota is Linux's only (cgroups).
type cpuQuota struct{}

func newCPUQuota(float64) (*cpuQuota, error) {
	return nil, errors.New("a CPU quota needs Linux's cgroups")
}

func (*cpuQuota) add(int) error { return errors.New("a CPU quota needs Linux's cgroups") }
func (*cpuQuota) close() error  { return nil }
