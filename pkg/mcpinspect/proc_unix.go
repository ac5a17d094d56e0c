//go:build unix

package mcpinspect

import (
	"os"
	"os/exec"
	"syscall"
)

var termSignal os.Signal = syscall.SIGTERM

// setProcessGroup puts the command in a process group of its own, so that a
// signal to the group reaches what it started, and a Ctrl-C at the
// terminal reaches only the agent (which then stops it in order).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the command's process group.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process == nil {
		return
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		_ = cmd.Process.Signal(sig)
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, s); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}
