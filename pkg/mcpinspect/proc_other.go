//go:build !unix

package mcpinspect

import (
	"os"
	"os/exec"
)

var termSignal os.Signal = os.Kill

func setProcessGroup(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}
