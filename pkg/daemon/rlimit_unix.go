//go:build linux || darwin

package daemon

import "syscall"

// openFileLimit raises the soft limit on open files to the hard one (Go
// does so at start since 1.19; this makes sure) and returns it.
func openFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	return lim.Cur, nil
}
