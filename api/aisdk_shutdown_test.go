package api_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// An AI SDK stream of a run still going is aborted at shutdown, not ended
// cleanly: useChat's default transport takes a clean end for the answer's
// end, so a graceful restart or deploy left every open page showing a cut
// answer as whole, with nothing to make it resume; an abort is an error
// it shows, and the answer is resumed or rebuilt.
func TestAISDKStreamAbortedAtShutdown(t *testing.T) {
	v := newEnv(t, api.Options{})
	s := v.sse("POST", "/v1/ai-sdk/demo/chat", map[string]any{
		"id":       "c1",
		"messages": []any{map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "hi"}}}},
		"metadata": map[string]any{"demo": map[string]any{"tokens": 1000, "delay_ms": 20}},
	})
	for {
		f, err := s.next()
		if err != nil {
			t.Fatal("the stream ended before its first text")
		}
		if strings.Contains(f.data, `"text-delta"`) {
			break
		}
	}
	go v.srv.Shutdown()
	rest, err := io.ReadAll(s.rd)
	if err == nil {
		t.Fatalf("the stream ended cleanly at shutdown, mid-answer (then %q)", rest)
	}
	if strings.Contains(string(rest), `"finish"`) {
		t.Fatalf("a finish chunk at shutdown: %q", rest)
	}
	// The demo run would go on for seconds: the test need not wait.
	if _, err := v.e.CancelRun(context.Background(), strings.TrimPrefix(s.res.Header.Get("Content-Location"), "/v1/runs/")); err != nil {
		t.Fatal(err)
	}
}
