package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// server is the tether serve process under test: killed and started again
// on the same address and data directory.
type server struct {
	bin, data, addr, url string
	debug                string // the URL of its --debug-addr
	flags                []string
	log                  *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	up   bool // started and not killed
}

// build compiles cmd/tether into dir.
func build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "tether")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/tetherhq/tether/cmd/tether")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build tether: %w", err)
	}
	return bin, nil
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start launches the server and waits until /readyz answers 200.
func (s *server) start(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	args := append([]string{"serve", "--addr", s.addr, "--data", s.data}, s.flags...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.Env = cleanEnv()
	setDeathSignal(cmd)
	fmt.Fprintf(s.log, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start tether: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.up = cmd, done, true
	s.mu.Unlock()
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(t0), nil
			}
		}
		select {
		case <-done:
			return 0, fmt.Errorf("tether exited before it was ready (see %s)", s.log.Name())
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(t0) > time.Minute {
			return 0, fmt.Errorf("tether was not ready after a minute")
		}
	}
}

// kill sends SIGKILL and waits until the process is gone. It is safe to
// call from several goroutines: only the first kills.
func (s *server) kill() bool {
	s.mu.Lock()
	if !s.up {
		s.mu.Unlock()
		return false
	}
	s.up = false
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	fmt.Fprintf(s.log, "=== SIGKILL %s\n", time.Now().Format(time.RFC3339Nano))
	return true
}

// stop sends SIGTERM and waits up to 20s, then kills.
func (s *server) stop() error {
	s.mu.Lock()
	if !s.up {
		s.mu.Unlock()
		return nil
	}
	s.up = false
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("tether exited %d on SIGTERM", code)
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("tether did not exit within 20s of SIGTERM")
	}
}

// cleanEnv is the environment without TETHER_* variables, which would
// change the flags' defaults.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) < 7 || kv[:7] != "TETHER_" {
			env = append(env, kv)
		}
	}
	return env
}
