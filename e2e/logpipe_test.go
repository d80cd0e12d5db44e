package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestLogReaderGone starts the server with its log going into a pipe whose
// reader goes away after the first line, as when the log shipper it is
// piped into dies or restarts. The server must go on serving (losing the
// log lines nobody can take), not die of SIGPIPE at its next line, and
// still stop cleanly on SIGTERM.
func TestLogReaderGone(t *testing.T) {
	addr := freeAddr(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", t.TempDir())
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = w, w
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("the server's first log line: %v", err)
	}
	r.Close() // the log's reader is gone

	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for i := range 20 { // each request is a log line
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		select {
		case <-exited:
			t.Fatalf("the server died after its log's reader went away (request %d): %v", i, waitErr)
		default:
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("the server after SIGTERM: %v, want exit status 0", waitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit within 30 s of SIGTERM")
	}
}
