package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs the command itself when a test starts this binary as it.
func TestMain(m *testing.M) {
	if os.Getenv("WORKER_GO_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHelpHidesToken: -h lists the flags with their defaults; the token
// taken from $TETHER_TOKEN is a secret and must not be among them (help
// output ends up in terminals, logs and issue reports).
func TestHelpHidesToken(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-h")
	cmd.Env = append(os.Environ(), "WORKER_GO_RUN_MAIN=1", "TETHER_TOKEN=sekret-worker-token-0123")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "-token") {
		t.Fatalf("no -token flag in the help:\n%s", out)
	}
	if strings.Contains(string(out), "sekret-worker-token-0123") {
		t.Errorf("the help shows the token:\n%s", out)
	}
}
