package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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

// A token from the environment is not printed by -h: the help showed it as
// the flag's default (`(default "…")`), on a screen or in a log that the
// token should never reach.
func TestHelpDoesNotShowTheToken(t *testing.T) {
	const secret = "tok-from-the-environment-0123456789"
	for _, c := range commands() {
		var stderr strings.Builder
		err := run(context.Background(), []string{c.name, "-h"}, envOf("TETHER_TOKEN", secret), io.Discard, &stderr)
		if err != nil {
			t.Fatalf("tether %s -h: %v", c.name, err)
		}
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("tether %s -h shows the token:\n%s", c.name, stderr.String())
		}
	}
	// It is still the token sent, unless --token names another.
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"threads":[]}`)
	}))
	defer srv.Close()
	env := envOf("TETHER_TOKEN", secret, "TETHER_SERVER", srv.URL)
	for _, args := range [][]string{{"threads"}, {"threads", "--token", "from-the-flag"}} {
		if err := run(context.Background(), args, env, io.Discard, io.Discard); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	if want := []string{"Bearer " + secret, "Bearer from-the-flag"}; !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
}
