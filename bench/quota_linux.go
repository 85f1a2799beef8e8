package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuQuota is a cgroup of the CPU controller that holds the processes put in it to a share of
// one CPU, the way a container's CPU limit does: cgroup v2's cpu.max, v1's cpu.cfs_quota_us,
// over a period of 100 ms. Making one needs write access to the hierarchy (root, or a
// delegated subtree).
type cpuQuota struct {
	dir string
}

const quotaPeriodUS = 100000

// newCPUQuota makes a cgroup limited to cores CPUs.
func newCPUQuota(cores float64) (*cpuQuota, error) {
	if cores <= 0 {
		return nil, fmt.Errorf("a CPU quota of %g cores", cores)
	}
	quota := strconv.Itoa(int(cores * quotaPeriodUS))
	name := fmt.Sprintf("afloat-bench-%d", os.Getpid())
	root, v2, err := cpuHierarchy()
	if err != nil {
		return nil, err
	}
	if v2 {
		// Controllers reach a child only when its parent enables them for its children.
		if err := writeCgroup(filepath.Join(root, "cgroup.subtree_control"), "+cpu"); err != nil {
			return nil, fmt.Errorf("enable the cpu controller under %s: %w", root, err)
		}
	}
	q := &cpuQuota{dir: filepath.Join(root, name)}
	if err := os.Mkdir(q.dir, 0o755); err != nil {
		return nil, fmt.Errorf("make a cgroup: %w", err)
	}
	if v2 {
		err = writeCgroup(filepath.Join(q.dir, "cpu.max"), quota+" "+strconv.Itoa(quotaPeriodUS))
	} else {
		err = writeCgroup(filepath.Join(q.dir, "cpu.cfs_period_us"), strconv.Itoa(quotaPeriodUS))
		if err == nil {
			err = writeCgroup(filepath.Join(q.dir, "cpu.cfs_quota_us"), quota)
		}
	}
	if err != nil {
		_ = os.Remove(q.dir)
		return nil, fmt.Errorf("set the cgroup's quota: %w", err)
	}
	return q, nil
}

// add moves process pid, every thread of it, into the cgroup.
func (q *cpuQuota) add(pid int) error {
	if err := writeCgroup(filepath.Join(q.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("put process %d under the CPU quota: %w", pid, err)
	}
	return nil
}

// procs is the processes in the cgroup.
func (q *cpuQuota) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(q.dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup.procs: %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// close removes the cgroup, which must be empty by then: the processes in it have exited.
func (q *cpuQuota) close() error {
	return os.Remove(q.dir)
}

// cpuHierarchy finds where the CPU controller's cgroups are mounted: the unified (v2)
// hierarchy when it offers the controller, else v1's "cpu" hierarchy.
func cpuHierarchy() (dir string, v2 bool, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	var unified, v1 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup2":
			unified = fields[4]
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				if opt == "cpu" {
					v1 = fields[4]
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", false, err
	}
	if unified != "" {
		if b, err := os.ReadFile(filepath.Join(unified, "cgroup.controllers")); err == nil && hasField(string(b), "cpu") {
			return unified, true, nil
		}
	}
	if v1 != "" {
		return v1, false, nil
	}
	return "", false, errors.New("no cgroup hierarchy with the cpu controller is mounted")
}

func hasField(s, want string) bool {
	for _, f := range strings.Fields(s) {
		if f == want {
			return true
		}
	}
	return false
}

func writeCgroup(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}
