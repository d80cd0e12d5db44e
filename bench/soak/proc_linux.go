package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the server if the soak dies, so
// that no server outlives it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
