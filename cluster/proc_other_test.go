//go:build !linux

package cluster

import "os/exec"

func setDeathSignal(cmd *exec.Cmd) {}
