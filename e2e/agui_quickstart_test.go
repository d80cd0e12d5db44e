package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docs/ag-ui-in.md's quick start, run as written: its pydantic-ai agent
// (the Python block, saved as agent.py) served by uvicorn, the real binary
// started with the page's --ag-ui-agent, and each of its curl commands,
// with this machine's ports for 9000 and 8080. The last prints the final
// answer the page says it prints.
func TestAGUIInQuickStart(t *testing.T) {
	py := pythonForInterop(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the quick start's commands need curl")
	}
	b, err := os.ReadFile("../docs/ag-ui-in.md")
	if err != nil {
		t.Fatal(err)
	}
	_, qs, ok := strings.Cut(string(b), "## Quick start")
	qs, _, ok2 := strings.Cut(qs, "## Configuration")
	if !ok || !ok2 {
		t.Fatal("docs/ag-ui-in.md has no quick start section")
	}
	code := regexp.MustCompile("(?s)```python\n(.*?)```").FindStringSubmatch(qs)
	if code == nil {
		t.Fatal("the quick start has no Python block")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent.py"), []byte(code[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(qs, -1) {
		cmds = append(cmds, shellCommands(block[1])...)
	}

	agentAddr := freeAddr(t)
	_, agentPort, _ := net.SplitHostPort(agentAddr)
	var s *server
	ran, answer, says := 0, "", ""
	for _, cmd := range cmds {
		cmd, comment, _ := strings.Cut(cmd, "  #") // the page's comment on what it prints
		cmd = strings.TrimSpace(cmd)
		switch f := strings.Fields(cmd); {
		case strings.HasPrefix(cmd, "uvicorn "):
			line := strings.Replace(strings.TrimSuffix(cmd, " &"), "--port 9000", "--port "+agentPort, 1)
			if line == strings.TrimSuffix(cmd, " &") {
				t.Fatalf("the quick start's uvicorn no longer listens on 9000: %q", cmd)
			}
			startUvicorn(t, py, dir, strings.Fields(line)[1:], agentAddr)
		case strings.HasPrefix(cmd, "bash scripts/serve "):
			flags := f[2:]
			for i := range flags {
				flags[i] = strings.ReplaceAll(flags[i], "127.0.0.1:9000", agentAddr)
			}
			s = start(t, "", flags...)
		case strings.HasPrefix(cmd, "curl "):
			if s == nil {
				t.Fatalf("%q comes before the server is started", cmd)
			}
			answer = runTourLine(t, s, strings.ReplaceAll(cmd, "localhost:8080", s.addr), strings.HasPrefix(cmd, "curl -N"))
			// {"content":"…",...}: what the answer begins with.
			says = strings.TrimPrefix(strings.TrimSuffix(strings.TrimSpace(comment), ",...}"), "{")
			ran++
		}
	}
	if ran != 4 {
		t.Fatalf("ran %d curl commands of the quick start, want 4", ran)
	}
	if !strings.HasPrefix(says, `"content":`) || !strings.Contains(answer, says) {
		t.Fatalf("the final answer is %s; the page says it is {%s,...}", answer, says)
	}
}

// startUvicorn runs uvicorn with args in dir and waits until it listens
// on addr. It is stopped when the test ends.
func startUvicorn(t *testing.T, py, dir string, args []string, addr string) {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-m", "uvicorn"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start uvicorn: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("uvicorn output:\n%s", out.String())
		}
	})
	eventually(t, 60*time.Second, "uvicorn to listen on "+addr, func() bool {
		c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}
