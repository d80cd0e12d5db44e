package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// What agents and other users wrote reaches the terminal without its
// control characters, in the notes and the error of tether run, the lines
// of tether tail --format text and the table of tether threads: an escape
// sequence in a tool's name, an error message or a thread's title was
// printed as it was, and could clear the screen or set the clipboard.
func TestNoTerminalControlsFromTheServer(t *testing.T) {
	const esc = "\x1b]52;c;b3duZWQ=\a\x1b[2J"
	jsonOf := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	evs := script(
		tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		tether.Event{Type: tether.EventToolStarted, MessageID: "m1", CallID: "c1", Name: "search" + esc},
		tether.Event{Type: tether.EventToolDelta, MessageID: "m1", CallID: "c1", Delta: `{"q":"` + esc + `"}`},
		tether.Event{Type: tether.EventToolFinished, MessageID: "m1", CallID: "c1", Error: jsonOf("no" + esc)},
		tether.Event{Type: tether.EventCustom, Name: "progress" + esc, Data: jsonOf(1)},
		tether.Event{Type: tether.EventRunFinished, Status: "error", Error: jsonOf(map[string]string{"code": "x", "message": "failed" + esc})},
	)
	clean := func(what, s string) {
		t.Helper()
		if strings.ContainsAny(s, "\x1b\a") {
			t.Errorf("%s holds control characters: %q", what, s)
		}
	}

	// The first stream sends the events; for tail, which follows the
	// thread for ever, a second one ends it.
	serve := func(n int, s *sse, r *http.Request) {
		if n > 1 {
			s.raw("event: end\ndata: {\"reason\":\"thread_deleted\"}\n\n")
			return
		}
		s.send(evs...)
	}
	f := newFakeServer(t, serve)
	_, stderr, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "", "hello")
	if err == nil {
		t.Fatal("run: no error for a run that ended error")
	}
	clean("run's stderr", stderr)
	clean("run's error", err.Error())
	if !strings.Contains(stderr, `search\x1b]52`) {
		t.Errorf("run's stderr does not show the escaped name: %q", stderr)
	}

	out, _, _ := cli(t, newFakeServer(t, serve).URL, "tail", "--format", "text", "--after", "-1", "t1")
	clean("tail's lines", out)
	if n := strings.Count(out, "\n"); n != len(evs) {
		t.Errorf("tail: %d lines for %d events:\n%s", n, len(evs), out)
	}

	url, c := realServer(t)
	if _, err := c.CreateThread(context.Background(), "t1", map[string]string{"title": "evil" + esc}); err != nil {
		t.Fatal(err)
	}
	out, _, err = cli(t, url, "threads")
	if err != nil {
		t.Fatal(err)
	}
	clean("threads' table", out)
}
