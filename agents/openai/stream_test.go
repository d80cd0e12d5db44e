package openai_test

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents/openai"
	"github.com/tetherhq/tether/runs"
)

// events reads every event of an SSE body, and the error it ends with.
func events(r io.Reader) ([]string, error) {
	next := openai.NewSSE(r)
	var out []string
	for {
		data, err := next()
		if err != nil {
			return out, err
		}
		out = append(out, string(data))
	}
}

func TestSSE(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"plain", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"CRLF and BOM", "\ufeffdata: a\r\n\r\ndata:b\r\n\r\n", []string{"a", "b"}},
		{"comments and other fields", ": ping\n\nevent: x\nid: 7\nretry: 10\ndata: a\n\n: ping\n\n", []string{"a"}},
		{"several data lines", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"only one space is dropped", "data:  a \n\n", []string{" a "}},
		{"no blank line before the end", "data: a\n\ndata: [DONE]\n", []string{"a", "[DONE]"}},
		{"a line cut off is dropped", "data: a\n\ndata: {\"cho", []string{"a"}},
		{"blank lines alone", "\n\n\n", nil},
		{"a field without colon", "data\n\n", []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := events(r)
				if !errors.Is(err, io.EOF) || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("events %q, %v; want %q", got, err, tc.want)
				}
			}
		})
	}
}

func TestSSELineTooLong(t *testing.T) {
	in := "data: " + strings.Repeat("x", openai.MaxLine) + "\n\n"
	if _, err := events(strings.NewReader(in)); !errors.Is(err, openai.ErrTooLong) {
		t.Fatalf("error %v", err)
	}
	// Just under the limit is fine.
	in = "data: " + strings.Repeat("x", openai.MaxLine-8) + "\n\n"
	if got, err := events(strings.NewReader(in)); !errors.Is(err, io.EOF) || len(got) != 1 {
		t.Fatalf("%d events, error %v", len(got), err)
	}
}

func TestSSEReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	got, err := events(r)
	if !errors.Is(err, boom) || !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("events %q, error %v", got, err)
	}
}

func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: a\n\ndata: b\n\n",
		"\ufeffdata: {\"choices\":[]}\r\n\r\n: ping\n\n",
		"data: x\ndata: y\n\nevent: e\n\ndata: [DONE]\n",
		"data",
		"\r\n\n:\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		whole, err1 := events(strings.NewReader(in))
		bytewise, err2 := events(iotest.OneByteReader(strings.NewReader(in)))
		if !reflect.DeepEqual(whole, bytewise) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("split reads change the events: %q %v vs %q %v", whole, err1, bytewise, err2)
		}
		if !errors.Is(err1, io.EOF) {
			t.Fatalf("error %v", err1)
		}
		for _, e := range whole {
			if !strings.Contains(in, strings.Split(e, "\n")[0]) {
				t.Fatalf("event %q is not in the input", e)
			}
		}
	})
}

func FuzzChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"hi","reasoning":"r","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"choices":[],"usage":{"total_tokens":3}}`,
		`{"choices":[{"delta":{"content":[{"type":"text","text":"a"}]}}]}`,
		`{"error":{"message":"x"}}`,
		`[`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = openai.ParseChunk([]byte(in)) // must not panic
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"0"}}, 0},
		{http.Header{"Retry-After": {"-4"}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"1"}}, time.Second},
	} {
		if got := openai.RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.h, got, tc.want)
		}
	}
}

// Whatever the provider sends, the answer's events are ones the state
// machine accepts.
func FuzzAnswer(f *testing.F) {
	for _, s := range [][]string{
		{content("a"), reasoning("b"), finish("stop"), usage},
		{delta(`{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{"}},{"index":1,"function":{"arguments":"1"}}]}`),
			delta(`{"tool_calls":[{"index":0,"id":"y","function":{"name":"g"}},{"index":1,"id":"x","function":{"name":"h"}}]}`), finish("tool_calls"),
			delta(`{"tool_calls":[{"index":0,"id":"x","function":{"name":"late"}}]}`)},
		{delta(`{"tool_calls":[{"id":"m-call1","function":{"name":"f"}},{"id":"","function":{"name":""}}]}`)},
		{`{"choices":[{"index":1,"delta":{"content":"other choice"}}]}`, `{"error":null,"usage":null}`},
		{`{"error":{"message":"x"}}`},
	} {
		f.Add(sse(s...) + done)
	}
	f.Fuzz(func(t *testing.T, body string) {
		const run = "run_1"
		m := runs.NewMachine("t1")
		tx := m.Begin()
		ts := tether.At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		apply := func(e *tether.Event) {
			t.Helper()
			e.RunID, e.TS = run, ts
			if err := tx.Apply(e); err != nil {
				t.Fatalf("%s rejected: %v", e.Type, err)
			}
		}
		apply(&tether.Event{Type: tether.EventRunCreated, Run: &tether.Run{ID: run, ThreadID: "t1", Agent: openai.Name, Status: tether.RunPending}})
		apply(&tether.Event{Type: tether.EventRunStarted, WorkerID: "w"})
		for _, e := range openai.Answer(body, "m") {
			if err := runs.WorkerEvent(e, run); err != nil {
				t.Fatalf("%s: %v", e.Type, err)
			}
			apply(e)
		}
		apply(&tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)})
	})
}

func TestSSEEventTooLong(t *testing.T) {
	line := "data: " + strings.Repeat("x", openai.MaxLine/4) + "\n"
	if _, err := events(strings.NewReader(strings.Repeat(line, 5) + "\n")); !errors.Is(err, openai.ErrTooLong) {
		t.Fatalf("error %v", err)
	}
	// Just under the limit is fine.
	line = "data: " + strings.Repeat("x", openai.MaxLine/4-1) + "\n"
	if got, err := events(strings.NewReader(strings.Repeat(line, 4) + "\n")); !errors.Is(err, io.EOF) || len(got) != 1 {
		t.Fatalf("%d events, error %v", len(got), err)
	}
}
