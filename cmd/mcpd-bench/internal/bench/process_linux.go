package bench

import "syscall"

// sysProcAttr makes a started process die with the harness.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
