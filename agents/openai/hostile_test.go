package openai_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents/openai"
)

// flood answers with an event stream of lines made by line, 1 MiB each,
// up to limit bytes or until the agent stops reading, and returns how
// many bytes it could write.
func flood(t *testing.T, line func(i int) string, limit int) (*fake, *atomic.Int64) {
	var written atomic.Int64
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for i := 0; written.Load() < int64(limit); i++ {
			k, err := w.Write([]byte(line(i)))
			written.Add(int64(k))
			if err != nil || rc.Flush() != nil {
				return
			}
		}
	})
	return f, &written
}

// An event of many data lines, each under the line limit, is bounded as a
// whole: the agent stops reading once it passed the limit, rather than
// buffering what the provider sends until it stops.
func TestManyDataLinesAreBounded(t *testing.T) {
	const limit = 64 << 20
	piece := "data: " + strings.Repeat("x", 1<<20) + "\n"
	f, written := flood(t, func(int) string { return piece }, limit)
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "could not be read")
	if n := written.Load(); n >= limit {
		t.Fatalf("the provider could write %d MiB of one event", n>>20)
	}
}

// The arguments of a tool call that the provider has not named yet are
// held until it does, and bounded: a provider that streams arguments and
// never a name is cut off.
func TestArgumentsBeforeTheNameAreBounded(t *testing.T) {
	const limit = 64 << 20
	piece := "data: " + delta(`{"tool_calls":[{"index":0,"function":{"arguments":`+q(strings.Repeat("x", 1<<20))+`}}]}`) + "\n\n"
	f, written := flood(t, func(int) string { return piece }, limit)
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "could not be read")
	if n := written.Load(); n >= limit {
		t.Fatalf("the provider could write %d MiB of arguments without a name", n>>20)
	}
}

// What the provider reports besides the answer (its model's name, the
// finish reason, the usage) cannot cost the answer: too large for the
// message's metadata, it is left out, and the run ends done with all its
// text.
func TestHugeMetadataIsLeftOut(t *testing.T) {
	huge := strings.Repeat("u", 2<<20)
	for name, chunks := range map[string][]string{
		"usage":         {finish("stop"), `{"choices":[],"usage":{"prompt_tokens":1,"junk":` + q(huge) + `}}`},
		"model":         {finish("stop"), `{"model":` + q(huge) + `,"choices":[]}`},
		"finish_reason": {finish(huge)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				streamSSE(w, sse(append([]string{content("all "), content("of it")}, chunks...)...)+done)
			})
			s := newAgent(t, f, openai.Options{})
			w := newWorld(t, s.a)
			snap, _ := w.run(t, "", user("q"))
			if r := snap.Runs[0]; r.Status != tether.RunDone {
				t.Fatalf("run %s %+v", r.Status, r.Error)
			}
			if m := answer(t, snap); text(m) != "all of it" || m.Status != tether.MessageDone {
				t.Fatalf("answer %q %s", text(m), m.Status)
			}
		})
	}
}

// A tool name no model gives is the provider's fault: the run ends
// upstream_error, and the text before it stays.
func TestHugeToolName(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(content("let me look"),
			delta(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":`+q(strings.Repeat("n", 2<<20))+`,"arguments":"{}"}}]}`),
			finish("tool_calls"))+done)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "could not be read")
	if m := answer(t, snap); text(m) != "let me look" || m.Status != tether.MessageError {
		t.Fatalf("answer %q %s", text(m), m.Status)
	}
}
