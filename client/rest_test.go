package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

const threadJSON = `{"id":"t 1","status":"idle","metadata":{"k":"v"},"created_at":"2025-01-02T03:04:05.006Z","updated_at":"2025-01-02T03:04:05.006Z","last_offset":"-1","active_run_id":null}`

const runJSON = `{"id":"r1","thread_id":"t1","agent":"demo","input":{"messages":[{"role":"user","content":"hi"}]},"status":"pending","metadata":{},"created_at":"2025-01-02T03:04:05.006Z","started_at":null,"last_update_at":"2025-01-02T03:04:05.006Z","completed_at":null,"attempt":0}`

func TestCreateThread(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, threadJSON)
	})
	th, err := c.CreateThread(context.Background(), "t 1", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if th.ID != "t 1" || th.Status != tether.ThreadIdle || string(th.Metadata) != `{"k":"v"}` || th.LastOffset != tether.OffsetStart {
		t.Errorf("thread = %+v", th)
	}
	r := rec.all()[0]
	if r.Method != "POST" || r.Path != "/v1/threads" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sekret" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if r.Body != `{"id":"t 1","metadata":{"k":"v"}}` {
		t.Errorf("body = %s", r.Body)
	}
}

func TestCreateThreadNoID(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeJSON(w, http.StatusInternalServerError, `{"error":{"code":"internal","message":"oops"}}`)
			return
		}
		writeJSON(w, http.StatusCreated, threadJSON)
	})
	// Without an id, the client names the thread, so that the retry after
	// a 500 (which may have created it) is a create-if-absent.
	if _, err := c.CreateThread(context.Background(), "", nil); err != nil {
		t.Fatalf("err = %v", err)
	}
	reqs := rec.all()
	if len(reqs) != 2 || reqs[0].Body != reqs[1].Body || !strings.HasPrefix(reqs[0].Body, `{"id":"thr_`) {
		t.Fatalf("requests = %+v", reqs)
	}
}

const threadSnapshotJSON = `{"thread":` + threadJSON + `,"runs":[` + runJSON + `],"messages":[],"offset":"0000000001_0000000000000002"}`

func TestThread(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"thread":`+threadJSON+`,"runs":[`+runJSON+`],"messages":[],"offset":"0000000001_0000000000000002"}`)
	})
	snap, err := c.Thread(context.Background(), "t/1")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Thread.ID != "t 1" || len(snap.Runs) != 1 || snap.Runs[0].ID != "r1" || snap.Offset != "0000000001_0000000000000002" {
		t.Errorf("snapshot = %+v", snap)
	}
	if r := rec.all()[0]; r.Method != "GET" || r.Path != "/v1/threads/t%2F1" || r.Header.Get("Accept") != "application/json" {
		t.Errorf("request %s %s %v", r.Method, r.Path, r.Header)
	}
}

func TestThreads(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"threads":[`+threadJSON+`],"next_cursor":"c2"}`)
	})
	ths, next, err := c.Threads(context.Background(), ThreadQuery{Status: tether.ThreadBusy, Limit: 10, Cursor: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != 1 || next != "c2" {
		t.Errorf("threads = %+v, next %q", ths, next)
	}
	if r := rec.all()[0]; r.Method != "GET" || r.Path != "/v1/threads" || r.Query != "cursor=c1&limit=10&status=busy" {
		t.Errorf("request %s %s?%s", r.Method, r.Path, r.Query)
	}
}

func TestDeleteThread(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	if err := c.DeleteThread(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	if r := rec.all()[0]; r.Method != "DELETE" || r.Path != "/v1/threads/t1" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
}

func TestFinalAnswer(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"content":"Hello.","complete":true,"completed_at":"2025-01-02T03:04:05.006Z","run_id":"r1","message_id":"m1"}`)
	})
	fa, err := c.FinalAnswer(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if fa.Content != "Hello." || !fa.Complete || fa.RunID != "r1" || fa.MessageID != "m1" || fa.CompletedAt.IsZero() {
		t.Errorf("final answer = %+v", fa)
	}
	if r := rec.all()[0]; r.Method != "GET" || r.Path != "/v1/threads/t1/final-answer" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
}

func TestCreateRun(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, runJSON)
	})
	run, err := c.CreateRun(context.Background(), "t1", RunRequest{
		Agent:     "demo",
		Input:     tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}},
		Metadata:  json.RawMessage(`{"demo":{"tokens":5}}`),
		Multitask: tether.MultitaskEnqueue,
	})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "r1" || run.Status != tether.RunPending || run.Input.Messages[0].Content != "hi" {
		t.Errorf("run = %+v", run)
	}
	r := rec.all()[0]
	if r.Method != "POST" || r.Path != "/v1/threads/t1/runs" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	want := `{"agent":"demo","input":{"messages":[{"role":"user","content":"hi"}]},"metadata":{"demo":{"tokens":5}},"multitask":"enqueue"}`
	if r.Body != want {
		t.Errorf("body = %s\nwant %s", r.Body, want)
	}
	if r.Header.Get("Idempotency-Key") == "" {
		t.Error("no Idempotency-Key")
	}
}

// A 503 (and a dropped connection) is retried with the same key, so the
// server can answer the retry with the run it already made.
func TestCreateRunRetriesWithSameKey(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"the server is starting"}}`)
		case 2:
			panic(http.ErrAbortHandler) // the connection drops before an answer
		default:
			writeJSON(w, http.StatusCreated, runJSON)
		}
	})
	run, err := c.CreateRun(context.Background(), "t1", RunRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "r1" {
		t.Errorf("run = %+v", run)
	}
	reqs := rec.all()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	key := reqs[0].Header.Get("Idempotency-Key")
	for i, r := range reqs {
		if got := r.Header.Get("Idempotency-Key"); got != key || key == "" {
			t.Errorf("request %d: Idempotency-Key %q, first %q", i, got, key)
		}
		if r.Body != reqs[0].Body {
			t.Errorf("request %d: body %s differs", i, r.Body)
		}
	}

	// A key of the caller's own is sent as is.
	if _, err := c.CreateRun(context.Background(), "t1", RunRequest{Agent: "demo", IdempotencyKey: "k1"}); err != nil {
		t.Fatal(err)
	}
	if got := rec.all()[3].Header.Get("Idempotency-Key"); got != "k1" {
		t.Errorf("Idempotency-Key = %q, want k1", got)
	}
}

func TestCreateRunGivesUp(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"down"}}`)
	})
	_, err := c.CreateRun(context.Background(), "t1", RunRequest{Agent: "demo"})
	if !errors.Is(err, tether.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if n := len(rec.all()); n != 1+maxRetries {
		t.Errorf("%d requests, want %d", n, 1+maxRetries)
	}
}

func TestCreateRunConflictNotRetried(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusConflict, `{"error":{"code":"run_active","message":"thread t1 has an active run r0"}}`)
	})
	_, err := c.CreateRun(context.Background(), "t1", RunRequest{Agent: "demo"})
	var te *tether.Error
	if !errors.As(err, &te) || te.Code != tether.CodeRunActive || te.Message != "thread t1 has an active run r0" {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, tether.ErrRunActive) {
		t.Error("errors.Is(err, ErrRunActive) is false")
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestRun(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"run":`+runJSON+`,"messages":[{"id":"m1","thread_id":"t1","run_id":"r1","role":"user","status":"done","parts":[{"type":"text","text":"hi"}],"metadata":{},"started_at":null,"last_update_at":null}]}`)
	})
	snap, err := c.Run(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Runs) != 1 || snap.Runs[0].ID != "r1" || len(snap.Messages) != 1 || snap.Messages[0].Parts[0].Text != "hi" || snap.Thread.ID != "t1" {
		t.Errorf("snapshot = %+v", snap)
	}
	if r := rec.all()[0]; r.Method != "GET" || r.Path != "/v1/runs/r1" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
}

func TestCancelRun(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, runJSON)
	})
	run, err := c.CancelRun(context.Background(), "r1")
	if err != nil || run.ID != "r1" {
		t.Fatalf("run = %+v, %v", run, err)
	}
	if r := rec.all()[0]; r.Method != "POST" || r.Path != "/v1/runs/r1/cancel" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
}

func TestSubmitInput(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"busy"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	if err := c.SubmitInput(context.Background(), "r1", "q1", map[string]string{"text": "blue"}); err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (a 503 is retried)", len(reqs))
	}
	if r := reqs[1]; r.Method != "POST" || r.Path != "/v1/runs/r1/input" || r.Body != `{"request_id":"q1","value":{"text":"blue"}}` {
		t.Errorf("request %s %s %s", r.Method, r.Path, r.Body)
	}
}

// A 500 after an input may mean it was taken: it is sent again, the same,
// which the server knows for the answer it took.
func TestSubmitInputRetriedOn500(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeJSON(w, http.StatusInternalServerError, `{"error":{"code":"internal","message":"oops"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	if err := c.SubmitInput(context.Background(), "r1", "q1", "x"); err != nil {
		t.Fatalf("err = %v", err)
	}
	reqs := rec.all()
	if len(reqs) != 2 || reqs[0].Body != reqs[1].Body {
		t.Errorf("requests = %+v, want the same one twice", reqs)
	}
}

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		code     tether.Code
		message  string
		requests int
	}{
		{"protocol error", 404, `{"error":{"code":"not_found","message":"thread t1 not found"}}`, tether.CodeNotFound, "thread t1 not found", 1},
		{"unknown code kept", 418, `{"error":{"code":"teapot","message":"short and stout"}}`, "teapot", "short and stout", 1},
		{"proxy page", 502, `<html>upstream db01.internal:5432 refused</html>`, tether.CodeInternal, "server answered 502 Bad Gateway", 1 + maxRetries},
		{"proxy page of a 4xx", 405, `<html>db01.internal: method not allowed</html>`, CodeProtocol, "server answered 405 Method Not Allowed", 1},
		{"other JSON", 400, `{"message":"secret detail"}`, tether.CodeBadRequest, "server answered 400 Bad Request", 1},
		{"empty", 401, ``, tether.CodeUnauthorized, "server answered 401 Unauthorized", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			_, err := c.Thread(context.Background(), "t1")
			var te *tether.Error
			if !errors.As(err, &te) {
				t.Fatalf("err = %#v, want a *tether.Error", err)
			}
			if te.Code != tc.code || te.Message != tc.message {
				t.Errorf("error = %q %q, want %q %q", te.Code, te.Message, tc.code, tc.message)
			}
			if strings.Contains(err.Error(), "db01") || strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks the body: %v", err)
			}
			if n := len(rec.all()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

func TestContextCancelStopsRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		cancel()
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"down"}}`)
	})
	c.min, c.max = 24*time.Hour, 24*time.Hour
	if _, err := c.Thread(ctx, "t1"); !errors.Is(err, context.Canceled) && !errors.Is(err, tether.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestTransportError(t *testing.T) {
	c := New("http://127.0.0.1:1", &Options{MinBackoff: 1, MaxBackoff: 1})
	_, err := c.Thread(context.Background(), "t1")
	if err == nil || !strings.HasPrefix(err.Error(), "get thread: ") {
		t.Fatalf("err = %v", err)
	}
}

// A 2xx whose body is not the JSON asked for (a proxy's page, nothing,
// JSON of another shape) is an error with a code the caller can switch
// on, the clients' own protocol (the TypeScript and Python clients give the
// same), and its message does not carry the body.
func TestUndecodableAnswer(t *testing.T) {
	tests := []struct {
		name string
		h    func(w http.ResponseWriter)
	}{
		{"proxy page", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, `<html>welcome to db01.internal</html>`)
		}},
		{"empty", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }},
		{"other shape", func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, `["db01"]`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) { tc.h(w) })
			_, err := c.CreateThread(context.Background(), "t1", nil)
			var te *tether.Error
			if !errors.As(err, &te) || te.Code != CodeProtocol {
				t.Fatalf("err = %v, want a *tether.Error with code protocol", err)
			}
			if strings.Contains(te.Message, "db01") {
				t.Errorf("message leaks the body: %q", te.Message)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// TestErrorAnswerNotOfTheProtocol: an error answer whose body is not the
// protocol's (a proxy's page) has the code its status means, as in the
// TypeScript and Python clients: internal for a 5xx without a code of its
// own, protocol for a 4xx without one (405, 418, 422: it was internal),
// and the status is kept on the error (docs/protocol.md §1).
func TestErrorAnswerNotOfTheProtocol(t *testing.T) {
	for status, want := range map[int]tether.Code{
		http.StatusBadRequest: tether.CodeBadRequest, http.StatusUnauthorized: tether.CodeUnauthorized,
		http.StatusForbidden: tether.CodeForbidden, http.StatusNotFound: tether.CodeNotFound,
		http.StatusConflict: tether.CodeConflict, http.StatusGone: tether.CodeGone,
		http.StatusRequestEntityTooLarge: tether.CodeTooLarge, http.StatusTeapot: CodeProtocol,
		http.StatusMethodNotAllowed: CodeProtocol, http.StatusUnprocessableEntity: CodeProtocol,
		http.StatusInternalServerError: tether.CodeInternal, http.StatusBadGateway: tether.CodeInternal,
	} {
		c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `<html>db01.internal</html>`)
		})
		_, err := c.CreateThread(context.Background(), "t1", nil)
		var te *tether.Error
		if !errors.As(err, &te) || te.Code != want || strings.Contains(te.Message, "db01") {
			t.Errorf("%d: err = %v, want a *tether.Error with code %s and no body", status, err, want)
			continue
		}
		if te.Status != status {
			t.Errorf("%d: Status = %d", status, te.Status)
		}
	}
}

// TestErrorRetryAfter: an error answer keeps its status and its
// Retry-After on the error, so that a caller that gives up after the
// client's retries (a 429 still answered) can say how long to wait; an
// answer without Retry-After, or with one that is not a number of
// seconds, leaves it 0.
func TestErrorRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status     int
		header     string
		body       string
		code       tether.Code
		retryAfter time.Duration
	}{
		{429, "12", `{"error":{"code":"rate_limited","message":"over the limit"}}`, tether.CodeRateLimited, 12 * time.Second},
		{503, "3", `{"error":{"code":"unavailable","message":"busy"}}`, tether.CodeUnavailable, 3 * time.Second},
		{429, "", `<html>slow down</html>`, tether.CodeRateLimited, 0},
		{429, "Wed, 21 Oct 2015 07:28:00 GMT", ``, tether.CodeRateLimited, 0},
		{404, "", `{"error":{"code":"not_found","message":"thread t1 not found"}}`, tether.CodeNotFound, 0},
	} {
		c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
			if tc.header != "" {
				w.Header().Set("Retry-After", tc.header)
			}
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		})
		_, err := c.Thread(context.Background(), "t1")
		var te *tether.Error
		if !errors.As(err, &te) || te.Code != tc.code {
			t.Errorf("%d %q: err = %v, want code %s", tc.status, tc.header, err, tc.code)
			continue
		}
		if te.Status != tc.status || te.RetryAfter != tc.retryAfter {
			t.Errorf("%d %q: Status, RetryAfter = %d, %v, want %d, %v", tc.status, tc.header, te.Status, te.RetryAfter, tc.status, tc.retryAfter)
		}
	}
}

// cutShort answers 200 with the start of body and then closes the
// connection: the Content-Length promises more than is sent, as when a
// connection drops mid-answer.
func cutShort(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = io.WriteString(w, body[:len(body)/2])
}

// A 2xx answer cut short by a dropped connection is a transport failure,
// not an answer: every call is safe to repeat (a GET, a thread with the id
// the client chose, a run with its Idempotency-Key) and is retried as
// after any transport error; when the retries are spent it fails with the
// transport's error, not a code of the server.
func TestCutShortAnswerRetried(t *testing.T) {
	t.Run("get", func(t *testing.T) {
		c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				cutShort(w, threadSnapshotJSON)
				return
			}
			writeJSON(w, http.StatusOK, threadSnapshotJSON)
		})
		s, err := c.Thread(context.Background(), "t1")
		if err != nil {
			t.Fatalf("Thread: %v", err)
		}
		if s.Thread.ID != "t 1" {
			t.Errorf("thread = %+v", s.Thread)
		}
		if n := len(rec.all()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
	t.Run("create run", func(t *testing.T) {
		c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
			if n < 3 {
				cutShort(w, runJSON)
				return
			}
			writeJSON(w, http.StatusCreated, runJSON)
		})
		run, err := c.CreateRun(context.Background(), "t1", RunRequest{Agent: "demo"})
		if err != nil || run.ID != "r1" {
			t.Fatalf("CreateRun = %+v, %v", run, err)
		}
		reqs := rec.all()
		if len(reqs) != 3 {
			t.Fatalf("%d requests, want 3", len(reqs))
		}
		for _, r := range reqs {
			if k := r.Header.Get("Idempotency-Key"); k != reqs[0].Header.Get("Idempotency-Key") || k == "" {
				t.Errorf("Idempotency-Key %q, want the first's %q", k, reqs[0].Header.Get("Idempotency-Key"))
			}
		}
	})
	t.Run("gives up", func(t *testing.T) {
		c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) { cutShort(w, threadSnapshotJSON) })
		_, err := c.Thread(context.Background(), "t1")
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "get thread: ") {
			t.Fatalf("err = %v, want get thread's unexpected EOF", err)
		}
		if n := len(rec.all()); n != 1+maxRetries {
			t.Errorf("%d requests, want %d", n, 1+maxRetries)
		}
	})
	t.Run("thread without an id", func(t *testing.T) {
		c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) { cutShort(w, threadJSON) })
		_, err := c.CreateThread(context.Background(), "", nil)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want unexpected EOF", err)
		}
		reqs := rec.all()
		if len(reqs) != 1+maxRetries || reqs[0].Body != reqs[maxRetries].Body {
			t.Errorf("%d requests, want %d of the same thread id", len(reqs), 1+maxRetries)
		}
	})
}

// An answer that is JSON but not the resource asked for (another service
// on the port answering {"status":"ok"} to every path, {}) is an error
// with code protocol, like one that is not JSON: CreateThread and
// CreateRun returned a thread and a run with no id, and CancelRun a
// success for a run it never reached.
func TestAnswerWithoutTheResource(t *testing.T) {
	calls := map[string]func(c *Client) error{
		"create thread": func(c *Client) error { _, err := c.CreateThread(context.Background(), "", nil); return err },
		"get thread":    func(c *Client) error { _, err := c.Thread(context.Background(), "t1"); return err },
		"list threads": func(c *Client) error {
			_, _, err := c.Threads(context.Background(), ThreadQuery{})
			return err
		},
		"create run": func(c *Client) error {
			_, err := c.CreateRun(context.Background(), "t1", RunRequest{Agent: "demo"})
			return err
		},
		"get run":    func(c *Client) error { _, err := c.Run(context.Background(), "r1"); return err },
		"cancel run": func(c *Client) error { _, err := c.CancelRun(context.Background(), "r1"); return err },
	}
	for _, body := range []string{`{}`, `{"status":"ok"}`} {
		for name, call := range calls {
			t.Run(name+" "+body, func(t *testing.T) {
				c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, body) })
				err := call(c)
				if tether.CodeOf(err) != CodeProtocol {
					t.Fatalf("err = %v, want code protocol", err)
				}
				if n := len(rec.all()); n != 1 {
					t.Errorf("%d requests, want 1", n)
				}
			})
		}
	}
}
