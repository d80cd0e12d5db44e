package cluster

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherhq/tether/internal/testutil"
)

// proc is one tether serve process.
type proc struct {
	endpoint
	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited
	out  *syncBuffer   // its output
}

// startProc starts tether serve with the given flags (besides --addr and
// --data) and waits until it is ready. It is stopped when the test ends;
// its output is logged if the test failed.
func startProc(t testing.TB, name string, flags ...string) *proc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--addr", addr, "--data", t.TempDir()}, flags...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TETHER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	p := &proc{endpoint: newEndpoint(name, "http://"+addr), t: t, cmd: cmd, done: make(chan struct{}), out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := startChild(cmd); err != nil {
		t.Fatalf("start tether: %v", err)
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s (tether %s) output:\n%s", name, strings.Join(args, " "), p.out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, _, _, err := p.call(t.Context(), "GET", "/readyz", nil)
		if err == nil && status == http.StatusOK {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready (%v):\n%s", name, p.cmd.ProcessState, p.out.String())
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not ready after 60s (last error %v)", name, err)
		}
	}
}

// kill9 kills the process with SIGKILL and waits until it is gone.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.hc.CloseIdleConnections()
}

// stop ends the process if it runs: SIGTERM, then SIGKILL after 10s.
func (p *proc) stop() {
	p.hc.CloseIdleConnections()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill9()
	}
}

// logLines returns the process's JSON log lines whose msg is msg and that
// carry attribute key=value.
func (p *proc) logLines(msg, key, value string) []string {
	var out []string
	for _, line := range strings.Split(p.out.String(), "\n") {
		if strings.Contains(line, fmt.Sprintf(`"msg":%q`, msg)) && strings.Contains(line, fmt.Sprintf(`%q:%q`, key, value)) {
			out = append(out, line)
		}
	}
	return out
}

// syncBuffer collects a process's output.
type syncBuffer = testutil.SyncBuffer
