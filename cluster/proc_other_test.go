//go:build !linux

package cluster

import "os/exec"

// startChild starts cmd (without a parent-death signal, which is Linux's).
func startChild(cmd *exec.Cmd) error { return cmd.Start() }
