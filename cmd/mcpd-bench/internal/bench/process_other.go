//go:build !linux

package bench

import "syscall"

// sysProcAttr is nil where the kernel has no parent-death signal: there the
// harness's Stop and its cleanup alone end the processes it started.
func sysProcAttr() *syscall.SysProcAttr { return nil }
