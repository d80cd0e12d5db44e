package cluster

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startChild starts cmd so that the kernel kills it if the test process
// dies without cleaning up (a panic, a -timeout): no server outlives its
// test. The parent-death signal fires when the OS thread that forked the
// child exits, not the process, so every child is forked by one goroutine
// locked to its thread for the life of the test binary.
func startChild(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	req := spawnReq{cmd: cmd, err: make(chan error, 1)}
	spawns <- req
	return <-req.err
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

var spawns = make(chan spawnReq)

func init() { go spawner() }

// spawner forks the children, from a thread that never exits.
func spawner() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the binary
	for r := range spawns {
		r.err <- r.cmd.Start()
	}
}
