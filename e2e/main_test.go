package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherhq/tether/internal/testutil"
)

// bin is the tether binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tether-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "tether")
	args := []string{"build", "-o", bin}
	if os.Getenv("E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the go command is needed to build tether:", err)
		return 1
	}
	build := exec.Command(gobin, append(args, "github.com/tetherhq/tether/cmd/tether")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build tether:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// Every test closes its streams and its HTTP transports; a
		// goroutine left over is a reader that never ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: goroutines leaked:", err)
			return 1
		}
	}
	return code
}

// server is one tether serve under test: a process that a test can kill
// and start again on the same address and data directory.
type server struct {
	t      testing.TB
	listen string // the --addr flag
	addr   string // 127.0.0.1:port
	URL    string // http://addr
	data   string
	flags  []string
	hc     *http.Client
	out    *syncBuffer // the output of every process, in order

	mu   sync.Mutex
	proc *process // the current process, nil once it exited and was waited for
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
	err  error         // Wait's error, once done
}

// start starts tether serve on a free loopback port with data dir dataDir
// (a new t.TempDir() if empty) and the extra flags, and waits until it is
// ready. The server is stopped when the test ends (SIGTERM, then SIGKILL
// after 10s); its output is logged if the test failed.
func start(t testing.TB, dataDir string, extraFlags ...string) *server {
	t.Helper()
	return startOn(t, freeAddr(t), dataDir, extraFlags...)
}

// startOn is start with the address to listen on (host:port); the tests
// reach it on 127.0.0.1 at the same port.
func startOn(t testing.TB, listen, dataDir string, extraFlags ...string) *server {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	s := &server{
		t: t, listen: listen, addr: addr, URL: "http://" + addr, data: dataDir, flags: extraFlags,
		hc:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		out: &syncBuffer{},
	}
	t.Cleanup(func() {
		s.stop(10 * time.Second)
		s.hc.CloseIdleConnections()
		if t.Failed() || os.Getenv("E2E_LOG") == "1" {
			t.Logf("server %s output:\n%s", s.addr, s.out.String())
		}
	})
	s.launch()
	s.waitReady()
	return s
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// cleanEnv is the test's environment without TETHER_* variables, which
// would change the flags' defaults.
func cleanEnv() []string {
	// No .pyc files next to the Python example.
	env := []string{"PYTHONDONTWRITEBYTECODE=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TETHER_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *server) launch() {
	s.t.Helper()
	args := append([]string{"serve", "--addr", s.listen, "--data", s.data}, s.flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	fmt.Fprintf(s.out, "=== tether %s\n", strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = s.out, s.out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start tether: %v", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

func (s *server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// waitReady polls /readyz until the server answers 200.
func (s *server) waitReady() {
	s.t.Helper()
	p := s.current()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		resp, err := s.hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			s.t.Fatalf("tether exited before it was ready: %v\n%s", p.err, s.out.String())
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("tether was not ready after 60s (last error: %v)", err)
		}
	}
}

// kill9 kills the server with SIGKILL and waits until it is gone.
func (s *server) kill9() {
	s.t.Helper()
	p := s.current()
	if p == nil {
		s.t.Fatal("kill9: the server is not running")
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	fmt.Fprintln(s.out, "=== killed with SIGKILL")
}

// restart starts the server again on the same address, data directory and
// flags, and waits until it is ready.
func (s *server) restart() {
	s.t.Helper()
	if s.current() != nil {
		s.t.Fatal("restart: the server is still running")
	}
	t0 := time.Now()
	s.launch()
	s.waitReady()
	fmt.Fprintf(s.out, "=== ready again after %v\n", time.Since(t0).Round(time.Millisecond))
}

// terminate sends SIGTERM and waits up to timeout for the process to exit,
// then kills it. It returns the exit status (-1 if it had to be killed)
// and how long the exit took.
func (s *server) terminate(timeout time.Duration) (status int, took time.Duration) {
	p := s.current()
	if p == nil {
		return 0, 0
	}
	t0 := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	killed := false
	select {
	case <-p.done:
	case <-time.After(timeout):
		killed = true
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	took = time.Since(t0)
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	fmt.Fprintf(s.out, "=== exited after SIGTERM in %v: %v\n", took.Round(time.Millisecond), p.err)
	if killed {
		return -1, took
	}
	return p.cmd.ProcessState.ExitCode(), took
}

// stop ends the server if it runs: SIGTERM, then SIGKILL after timeout.
func (s *server) stop(timeout time.Duration) {
	if s.current() != nil {
		// The transport may hold connections it dialed but never used;
		// net/http's Shutdown waits up to 5s for such a connection to
		// send its request. Close them first: the test is over.
		s.hc.CloseIdleConnections()
		s.terminate(timeout)
	}
}

// syncBuffer collects a process's output.
type syncBuffer = testutil.SyncBuffer

// call makes one REST call with a JSON body (if body is not nil) and
// returns the status and the response body. Transport errors are returned.
func (s *server) call(ctx context.Context, method, path string, body any, header ...string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// mustCall is call that fails the test on a transport error or a status
// other than want, and decodes the answer into out (if not nil).
func (s *server) mustCall(method, path string, body any, want int, out any, header ...string) {
	s.t.Helper()
	status, b, err := s.call(context.Background(), method, path, body, header...)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}
