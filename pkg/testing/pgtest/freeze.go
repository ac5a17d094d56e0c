package pgtest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Freeze stops every process of the server with SIGSTOP, as a host that
// hangs does: connections are accepted by the kernel and never answered,
// and statements in flight never end, where a stopped server refuses
// connections at once. Thaw resumes it; so does the end of the test. Only
// a private cluster can be frozen.
func (c *Cluster) Freeze(t testing.TB) {
	t.Helper()
	if c.external || c.shared {
		t.Fatalf("pgtest: only a private cluster (NewCluster) can be frozen")
	}
	postmaster := c.PID()
	if postmaster == 0 {
		t.Fatalf("pgtest: freeze: no postmaster.pid in %s", c.dataDir)
	}
	t.Cleanup(func() { c.Thaw(t) })
	// The postmaster first, so that no process is started meanwhile.
	if err := syscall.Kill(postmaster, syscall.SIGSTOP); err != nil {
		t.Fatalf("pgtest: freeze: %v", err)
	}
	for _, pid := range children(postmaster) {
		_ = syscall.Kill(pid, syscall.SIGSTOP) // one that just ended has nothing to stop
	}
}

// Thaw resumes a server that Freeze stopped.
func (c *Cluster) Thaw(t testing.TB) {
	t.Helper()
	postmaster := c.PID()
	if postmaster == 0 {
		return
	}
	for _, pid := range children(postmaster) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := syscall.Kill(postmaster, syscall.SIGCONT); err != nil {
		t.Errorf("pgtest: thaw: %v", err)
	}
}

// children returns the ids of the processes whose parent is parent, from
// /proc.
func children(parent int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndex(string(stat), ") ")
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat)[i+2:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == parent {
			out = append(out, pid)
		}
	}
	return out
}
