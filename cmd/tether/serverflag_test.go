package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// --server without its scheme ("localhost:8080", as one types it) is
// refused at once with an error naming the flag, by every client command;
// tail retried it forever ("lost the connection to the server;
// reconnecting"), the others said `unsupported protocol scheme "localhost"`.
func TestClientCommandsRefuseAServerThatIsNotAURL(t *testing.T) {
	cmds := []struct {
		name string
		run  func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error
		args []string
	}{
		{"tail", tailCmd, []string{"t1"}},
		{"run", runCmd, []string{"hello"}},
		{"threads", threadsCmd, nil},
		{"cancel", cancelCmd, []string{"run_1"}},
		{"answer", answerCmd, []string{"run_1", "yes"}},
	}
	for _, c := range cmds {
		for _, server := range []string{"localhost:8080", "ftp://127.0.0.1:8080", "http://"} {
			t.Run(c.name+" "+server, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var stderr strings.Builder
				err := c.run(ctx, append([]string{"--server", server}, c.args...), noEnv, io.Discard, &stderr)
				if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "--server") {
					t.Fatalf("err %v (stderr %q): want an error naming --server at once", err, stderr.String())
				}
			})
		}
	}
}

// The help of a command without flags has no empty Flags section.
func TestHelpWithoutFlags(t *testing.T) {
	var stderr strings.Builder
	if err := versionCmd(context.Background(), []string{"-h"}, noEnv, io.Discard, &stderr); err == nil {
		t.Fatal("version -h: no error")
	}
	if !strings.Contains(stderr.String(), "Usage: tether version") || strings.Contains(stderr.String(), "Flags") {
		t.Fatalf("version -h:\n%s", stderr.String())
	}
}
