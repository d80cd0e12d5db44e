package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// wsMsg is a server frame, every field of every op.
type wsMsg struct {
	Op          string          `json:"op"`
	ID          string          `json:"id"`
	ThreadID    string          `json:"thread_id"`
	Offset      tether.Offset   `json:"offset"`
	HeartbeatMs int64           `json:"heartbeat_ms"`
	Reason      string          `json:"reason"`
	Reset       bool            `json:"reset"`
	TS          string          `json:"ts"`
	Thread      *tether.Thread  `json:"thread"`
	Runs        []tether.Run    `json:"runs"`
	Event       json.RawMessage `json:"event"`
	Error       struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// ev decodes an event frame's event.
func (m wsMsg) ev() tether.Event {
	var e tether.Event
	if err := json.Unmarshal(m.Event, &e); err != nil {
		panic("event frame " + m.raw + ": " + err.Error())
	}
	return e
}

type wsClient struct {
	t *testing.T
	c *websocket.Conn
}

func (v *env) dialWS(query string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(v.url, "http")+"/v1/ws"+query, opts)
}

// ws opens a socket; hdr are header name/value pairs.
func (v *env) ws(query string, hdr ...string) *wsClient {
	v.t.Helper()
	opts := &websocket.DialOptions{HTTPHeader: http.Header{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		opts.HTTPHeader.Set(hdr[i], hdr[i+1])
	}
	c, _, err := v.dialWS(query, opts)
	if err != nil {
		v.t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	v.t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: v.t, c: c}
}

// wsAs opens a socket with "Authorization: Bearer token": the client (the
// caller closes it), or nil and the status the upgrade was refused with.
func (v *env) wsAs(token string) (*wsClient, int) {
	v.t.Helper()
	c, res, err := v.dialWS("", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		if res == nil {
			v.t.Fatalf("dial: %v", err)
		}
		return nil, res.StatusCode
	}
	return &wsClient{t: v.t, c: c}, 0
}

func (w *wsClient) sendRaw(typ websocket.MessageType, b []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, typ, b); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// send writes v as JSON, or a string as it is.
func (w *wsClient) send(v any) {
	w.t.Helper()
	b, ok := v.(string)
	if !ok {
		j, err := json.Marshal(v)
		if err != nil {
			w.t.Fatal(err)
		}
		b = string(j)
	}
	w.sendRaw(websocket.MessageText, []byte(b))
}

// next reads the next frame, skipping heartbeats.
func (w *wsClient) next() (wsMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		typ, b, err := w.c.Read(ctx)
		if err != nil {
			return wsMsg{}, err
		}
		if typ != websocket.MessageText {
			return wsMsg{}, fmt.Errorf("a %v frame", typ)
		}
		m := wsMsg{raw: string(b)}
		if err := json.Unmarshal(b, &m); err != nil {
			return wsMsg{}, fmt.Errorf("frame %s: %v", b, err)
		}
		if m.Op != "ping" {
			return m, nil
		}
	}
}

func (w *wsClient) read() wsMsg {
	w.t.Helper()
	m, err := w.next()
	if err != nil {
		w.t.Fatalf("read: %v", err)
	}
	return m
}

// expect reads a frame and checks its op and id.
func (w *wsClient) expect(op, id string) wsMsg {
	w.t.Helper()
	m := w.read()
	if m.Op != op || m.ID != id {
		w.t.Fatalf("got %s, want op %s id %q", m.raw, op, id)
	}
	return m
}

func (w *wsClient) subscribe(id string, fields ...any) {
	w.t.Helper()
	req := map[string]any{"op": "subscribe", "id": id}
	for i := 0; i+1 < len(fields); i += 2 {
		req[fields[i].(string)] = fields[i+1]
	}
	w.send(req)
}

// readLog reads a thread's whole log as JSON.
func (v *env) readLog(tid string) []json.RawMessage {
	v.t.Helper()
	var out []json.RawMessage
	cursor := "-1"
	for {
		var p struct {
			Events   []json.RawMessage `json:"events"`
			Next     string            `json:"next_offset"`
			UpToDate bool              `json:"up_to_date"`
		}
		v.mustDo(200, "GET", "/v1/threads/"+tid+"/events?after="+cursor, nil, "Accept", "application/json").json(&p)
		out = append(out, p.Events...)
		cursor = p.Next
		if p.UpToDate {
			return out
		}
	}
}

func compact(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %s: %v", b, err)
	}
	return buf.String()
}

func TestWSSnapshots(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	run := v.demoRun("t1", `{"tokens":5,"delay_ms":0}`)
	v.waitRun(run, tether.RunDone)
	tail := v.readLog("t1")
	var last tether.Event
	json.Unmarshal(tail[len(tail)-1], &last)
	w := v.ws("")

	// No cursor: subscribed, then a snapshot as of the tail.
	w.subscribe("a", "thread_id", "t1")
	if m := w.expect("subscribed", "a"); m.Offset != last.Offset || m.ThreadID != "t1" {
		t.Fatalf("subscribed: %s", m.raw)
	}
	snap := w.expect("snapshot", "a")
	if snap.Offset != last.Offset || snap.Reset || snap.Thread == nil || snap.Thread.ID != "t1" || len(snap.Runs) != 1 {
		t.Fatalf("snapshot: %s", snap.raw)
	}
	// A run subscription of a finished run: its snapshot, then its end.
	w.subscribe("b", "run_id", run)
	w.expect("subscribed", "b")
	if m := w.expect("snapshot", "b"); len(m.Runs) != 1 || m.Runs[0].ID != run {
		t.Fatalf("run snapshot: %s", m.raw)
	}
	if m := w.expect("end", "b"); m.Reason != "run_finished" || m.Offset != last.Offset {
		t.Fatalf("end: %s", m.raw)
	}
	// "now" on a finished run: no snapshot, the end at once.
	w.subscribe("c", "run_id", run, "after", "now")
	w.expect("subscribed", "c")
	if m := w.expect("end", "c"); m.Reason != "run_finished" {
		t.Fatalf("end: %s", m.raw)
	}
	// An unknown cursor: a reset snapshot.
	w.subscribe("d", "thread_id", "t1", "after", string(tether.FormatOffset(1, 123456789)))
	w.expect("subscribed", "d")
	if m := w.expect("snapshot", "d"); !m.Reset || m.Offset != last.Offset {
		t.Fatalf("reset snapshot: %s", m.raw)
	}
	// A known cursor: the events after it, filtered by type.
	w.subscribe("e", "thread_id", "t1", "after", "-1", "types", []string{tether.EventRunFinished})
	w.expect("subscribed", "e")
	if m := w.expect("event", "e"); m.ev().Type != tether.EventRunFinished || m.ev().Offset != last.Offset {
		t.Fatalf("event: %s", m.raw)
	}
	// Live: a and d see the next run from its first event, spliced as is.
	run2 := v.demoRun("t1", `{"tokens":3,"delay_ms":0}`)
	v.waitRun(run2, tether.RunDone)
	log := v.readLog("t1")
	got := map[string][]string{}
	for len(got["a"]) < len(log)-len(tail) || len(got["d"]) < len(log)-len(tail) || len(got["e"]) < 1 {
		m := w.read()
		if m.Op != "event" {
			t.Fatalf("frame %s", m.raw)
		}
		got[m.ID] = append(got[m.ID], string(m.Event))
	}
	for _, id := range []string{"a", "d"} {
		for i, raw := range log[len(tail):] {
			if got[id][i] != compact(t, raw) {
				t.Fatalf("%s: event %d: %s, want %s", id, i, got[id][i], raw)
			}
		}
	}
}

func TestWSUnsubscribe(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	w := v.ws("")
	w.subscribe("s1", "thread_id", "t1", "after", "now")
	w.expect("subscribed", "s1")
	w.subscribe("s2", "thread_id", "t1", "after", "now")
	w.expect("subscribed", "s2")
	w.send(`{"op":"unsubscribe","id":"s1"}`)
	if m := w.expect("end", "s1"); m.Reason != "unsubscribed" || m.Offset != "-1" {
		t.Fatalf("end: %s", m.raw)
	}
	run := v.demoRun("t1", `{"tokens":5,"delay_ms":0}`)
	for {
		m := w.read()
		if m.ID != "s2" || m.Op != "event" {
			t.Fatalf("after unsubscribe: %s", m.raw)
		}
		if e := m.ev(); e.Type == tether.EventRunFinished && e.RunID == run {
			break
		}
	}
	// The id is free again.
	w.subscribe("s1", "thread_id", "t1", "after", "now")
	w.expect("subscribed", "s1")
	w.send(`{"op":"ping","id":"p"}`)
	w.expect("pong", "p")
}

// An id is free again as soon as its end frame is sent, whatever ended
// the subscription: a client that subscribes again with it on reading
// the end is not refused conflict. (The subscription's goroutine forgot
// the id only after queueing the end, which a quick client could beat;
// -race slows it enough to lose every run of this test.)
func TestWSIdFreeAtEnd(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	run := v.demoRun("t1", `{"tokens":1}`)
	v.waitRun(run, tether.RunDone)
	w := v.ws("")
	for range 2000 {
		// A finished run: the subscription ends by itself at once.
		w.subscribe("a", "run_id", run, "after", "now")
		w.expect("subscribed", "a")
		if m := w.expect("end", "a"); m.Reason != "run_finished" {
			t.Fatalf("end: %s", m.raw)
		}
	}
}

// A subscribe that the store does not answer within SubscribeTimeout is
// refused unavailable, as an SSE stream ends then: the socket's frames are
// handled one after another, so a subscribe that waited on the store for
// as long as it took left the client without an answer, and its pings and
// unsubscribes too.
func TestWSStoreNeverAnswers(t *testing.T) {
	v, h, cursor := coldThread(t, api.Options{SubscribeTimeout: 50 * time.Millisecond})
	w := v.ws("")
	h.hold()
	w.subscribe("a", "thread_id", "cold", "after", string(cursor))
	if m := w.expect("error", "a"); m.Error.Code != "unavailable" || m.Error.Message == "" {
		t.Fatalf("subscribe while the store does not answer: %s", m.raw)
	}
	w.send(`{"op":"ping","id":"p"}`)
	w.expect("pong", "p")
	// Once the store answers, the same subscribe starts.
	h.release()
	w.subscribe("a", "thread_id", "cold", "after", string(cursor))
	w.expect("subscribed", "a")
}

func TestWSErrors(t *testing.T) {
	v := newEnv(t, api.Options{MaxSubscriptions: 3})
	v.thread("t1")
	v.thread("t2")
	run := v.demoRun("t1", `{"tokens":2,"delay_ms":0}`)
	v.waitRun(run, tether.RunDone)
	w := v.ws("")
	for _, id := range []string{"a", "b", "c"} {
		w.subscribe(id, "thread_id", "t1", "after", "now")
		w.expect("subscribed", id)
	}
	cases := []struct {
		name   string
		frame  string
		binary bool
		code   string
		id     string
	}{
		{"duplicate id", `{"op":"subscribe","id":"a","thread_id":"t1"}`, false, "conflict", "a"},
		{"too many", `{"op":"subscribe","id":"d","thread_id":"t1"}`, false, "too_large", "d"},
		{"invalid JSON", `{"op":"subscribe",`, false, "bad_request", ""},
		{"not an object", `["subscribe"]`, false, "bad_request", ""},
		{"a string", `"ping"`, false, "bad_request", ""},
		{"unknown op", `{"op":"fly","id":"x"}`, false, "bad_request", "x"},
		{"op not a string", `{"op":1,"id":"x"}`, false, "bad_request", "x"},
		{"no op", `{"id":"x"}`, false, "bad_request", "x"},
		{"missing id", `{"op":"subscribe","thread_id":"t1"}`, false, "bad_request", ""},
		{"empty id", `{"op":"subscribe","id":"","thread_id":"t1"}`, false, "bad_request", ""},
		{"id not a string", `{"op":"subscribe","id":7,"thread_id":"t1"}`, false, "bad_request", ""},
		{"id too long", `{"op":"subscribe","id":"` + strings.Repeat("i", 129) + `","thread_id":"t1"}`, false, "bad_request", ""},
		{"binary frame", `{"op":"ping"}`, true, "bad_request", ""},
		// Not UTF-8: the id would come back as another (U+FFFD), the
		// same for every such id; a JSON text is UTF-8 (RFC 8259), as a
		// request body must be.
		{"id not UTF-8", "{\"op\":\"subscribe\",\"id\":\"\xff\",\"thread_id\":\"t1\"}", false, "bad_request", ""},
		{"ping id not UTF-8", "{\"op\":\"ping\",\"id\":\"p\xc3\"}", false, "bad_request", ""},
		{"thread not UTF-8", "{\"op\":\"subscribe\",\"id\":\"x\",\"thread_id\":\"t1\xff\"}", false, "bad_request", ""},
		{"unknown field", `{"op":"subscribe","id":"x","thread":"t1"}`, false, "bad_request", "x"},
		{"bad types", `{"op":"subscribe","id":"x","thread_id":"t1","types":"text.delta"}`, false, "bad_request", "x"},
		{"no thread", `{"op":"unsubscribe","id":"x"}`, false, "not_found", "x"},
		{"unsubscribe unknown", `{"op":"unsubscribe","id":"zz"}`, false, "not_found", "zz"},
	}
	for _, c := range cases {
		typ := websocket.MessageText
		if c.binary {
			typ = websocket.MessageBinary
		}
		w.sendRaw(typ, []byte(c.frame))
		m := w.read()
		if m.Op != "error" || m.ID != c.id || m.Error.Code != c.code || m.Error.Message == "" {
			t.Errorf("%s: got %s, want error %s for id %q", c.name, m.raw, c.code, c.id)
		}
	}
	// Below the limit, the errors of a subscribe that the engine refuses.
	w.send(`{"op":"unsubscribe","id":"c"}`)
	w.expect("end", "c")
	cases = []struct {
		name   string
		frame  string
		binary bool
		code   string
		id     string
	}{
		{"no thread", `{"op":"subscribe","id":"x"}`, false, "bad_request", "x"},
		{"bad cursor", `{"op":"subscribe","id":"x","thread_id":"t1","after":"a/b"}`, false, "bad_request", "x"},
		{"unknown type", `{"op":"subscribe","id":"x","thread_id":"t1","types":["text.delta","txt.delta"]}`, false, "bad_request", "x"},
		{"empty type", `{"op":"subscribe","id":"x","thread_id":"t1","types":[""]}`, false, "bad_request", "x"},
		{"unknown thread", `{"op":"subscribe","id":"x","thread_id":"nope"}`, false, "not_found", "x"},
		{"unknown run", `{"op":"subscribe","id":"x","run_id":"run_nope"}`, false, "not_found", "x"},
		{"run of another thread", `{"op":"subscribe","id":"x","thread_id":"t2","run_id":"` + run + `"}`, false, "not_found", "x"},
		{"unknown message", `{"op":"subscribe","id":"x","thread_id":"t1","message_id":"msg_nope"}`, false, "not_found", "x"},
	}
	for _, c := range cases {
		w.send(c.frame)
		m := w.read()
		if m.Op != "error" || m.ID != c.id || m.Error.Code != c.code || m.Error.Message == "" {
			t.Errorf("%s: got %s, want error %s for id %q", c.name, m.raw, c.code, c.id)
		}
	}
	// The socket still works.
	w.subscribe("x", "run_id", run, "after", "-1")
	w.expect("subscribed", "x")
	if m := w.expect("event", "x"); m.ev().Type != tether.EventRunCreated {
		t.Fatalf("first event: %s", m.raw)
	}
}

func TestWSFrameLimit(t *testing.T) {
	v := newEnv(t, api.Options{})
	w := v.ws("")
	// 64 KiB is allowed.
	pad := `{"op":"ping","id":"big","pad":"`
	frame := pad + strings.Repeat("x", 64<<10-len(pad)-2) + `"}`
	w.send(frame)
	w.expect("pong", "big")
	// One byte more closes the socket with 1009.
	frame = pad + strings.Repeat("x", 64<<10-len(pad)-1) + `"}`
	w.send(frame)
	_, err := w.next()
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("after a frame over 64 KiB: %v", err)
	}
}

func TestWSAuth(t *testing.T) {
	const clientTok, workerTok = "client-token-0123456789", "worker-token-0123456789"
	var logs testutil.SyncBuffer
	v := newEnv(t, api.Options{
		Keys:   []api.Key{{Token: clientTok, Role: api.RoleClient}, {Token: workerTok, Role: api.RoleWorker}},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, "Authorization", "Bearer "+clientTok)

	for _, q := range []string{"", "?access_token=wrong-token-0123456789"} {
		_, res, err := v.dialWS(q, nil)
		if err == nil || res == nil || res.StatusCode != 401 {
			t.Fatalf("dial %q: %v %v", q, res, err)
		}
		b, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(b), `"code":"unauthorized"`) {
			t.Fatalf("dial %q: body %s", q, b)
		}
	}
	for _, w := range []*wsClient{v.ws("", "Authorization", "Bearer "+clientTok), v.ws("?access_token=" + clientTok)} {
		w.subscribe("s", "thread_id", "t1")
		w.expect("subscribed", "s")
	}
	// A worker may follow runs it holds, not threads, nor runs it does not
	// hold (TestWorkerReadsOnlyItsRuns has one it holds).
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"demo","input":{"messages":[{"role":"user","content":"hi"}]},"metadata":{"demo":{"tokens":1}}}`,
		"Authorization", "Bearer "+clientTok).json(&run)
	w := v.ws("?x=1&access_token=" + workerTok)
	w.subscribe("s", "thread_id", "t1")
	if m := w.expect("error", "s"); m.Error.Code != "forbidden" {
		t.Fatalf("worker thread subscription: %s", m.raw)
	}
	w.subscribe("s", "run_id", run.ID, "after", "-1")
	if m := w.expect("error", "s"); m.Error.Code != "forbidden" {
		t.Fatalf("worker subscription to the in-process agent's run: %s", m.raw)
	}
	w.c.Close(websocket.StatusNormalClosure, "")
	if strings.Contains(logs.String(), clientTok) || strings.Contains(logs.String(), workerTok) {
		t.Fatalf("a token was logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "/v1/ws") {
		t.Fatalf("no request log:\n%s", logs.String())
	}
}

func TestWSOrigin(t *testing.T) {
	v := newEnv(t, api.Options{CORSOrigins: []string{"https://app.example"}})
	for origin, ok := range map[string]bool{"": true, v.url: true, "https://app.example": true, "https://evil.example": false} {
		c, res, err := v.dialWS("", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		if ok != (err == nil) {
			t.Fatalf("origin %q: %v", origin, err)
		}
		if err != nil && res.StatusCode != 403 {
			t.Fatalf("origin %q: status %d", origin, res.StatusCode)
		}
		if c != nil {
			c.CloseNow()
		}
	}
	// An origin is a string, not a pattern: an IPv6 host's brackets are
	// not a character class.
	v6 := newEnv(t, api.Options{CORSOrigins: []string{"http://[::1]:3000"}})
	for origin, ok := range map[string]bool{"http://[::1]:3000": true, "http://::3000": false, "http://1:3000": false} {
		c, _, err := v6.dialWS("", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		if ok != (err == nil) {
			t.Fatalf("origin %q allowed by http://[::1]:3000: %v", origin, err)
		}
		if c != nil {
			c.CloseNow()
		}
	}
	anyOrigin := newEnv(t, api.Options{CORSOrigins: []string{"*"}})
	c, _, err := anyOrigin.dialWS("", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err != nil {
		t.Fatalf("any origin: %v", err)
	}
	c.CloseNow()
}

func TestWSPing(t *testing.T) {
	v := newEnv(t, api.Options{Heartbeat: 30 * time.Millisecond})
	w := v.ws("")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The server pings: an app-level frame, and a control ping that the
	// client's reader answers.
	for pings := 0; pings < 3; {
		_, b, err := w.c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m wsMsg
		json.Unmarshal(b, &m)
		if m.Op != "ping" || m.TS == "" {
			t.Fatalf("frame %s", b)
		}
		pings++
	}
	w.send(`{"op":"ping"}`)
	if m := w.expect("pong", ""); m.TS == "" {
		t.Fatalf("pong: %s", m.raw)
	}
	// A client's pong is ignored.
	w.send(`{"op":"pong"}`)
	w.send(`{"op":"ping","id":"p"}`)
	w.expect("pong", "p")
	// A subscription says the socket's heartbeat, as SSE's connected
	// does, for the client's stall detector.
	v.thread("t1")
	w.subscribe("s", "thread_id", "t1", "after", "now")
	if m := w.expect("subscribed", "s"); m.HeartbeatMs != 30 {
		t.Fatalf("subscribed: %s, want heartbeat_ms 30", m.raw)
	}
}

func TestWSThreadDeleted(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	w := v.ws("")
	w.subscribe("live", "thread_id", "t1", "after", "now")
	w.expect("subscribed", "live")
	w.subscribe("catchup", "thread_id", "t1", "after", "-1")
	w.expect("subscribed", "catchup")
	v.mustDo(204, "DELETE", "/v1/threads/t1", nil)
	for range 2 {
		if m := w.read(); m.Op != "end" || m.Reason != "thread_deleted" {
			t.Fatalf("frame %s", m.raw)
		}
	}
}

// A subscription ends with thread_deleted when its thread is deleted, also
// when a thread of the same ID is created again at once: the reason was
// looked up in the store after the fact, found the new thread, and said
// shutdown.
func TestWSThreadDeletedAndCreatedAgain(t *testing.T) {
	v := newEnv(t, api.Options{})
	w := v.ws("")
	for i := range 30 {
		v.thread("t1")
		id := fmt.Sprintf("s%d", i)
		w.subscribe(id, "thread_id", "t1", "after", "now")
		w.expect("subscribed", id)
		v.mustDo(204, "DELETE", "/v1/threads/t1", nil)
		v.thread("t1")
		if m := w.read(); m.Op != "end" || m.Reason != "thread_deleted" {
			t.Fatalf("try %d: frame %s", i, m.raw)
		}
		v.mustDo(204, "DELETE", "/v1/threads/t1", nil)
	}
}

func TestWSShutdown(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	run := v.demoRun("t1", `{"tokens":3,"delay_ms":0}`)
	v.waitRun(run, tether.RunDone)
	w := v.ws("")
	w.subscribe("a", "thread_id", "t1", "after", "now")
	w.expect("subscribed", "a")
	w.subscribe("b", "thread_id", "t1", "after", "-1", "types", []string{tether.EventRunCreated})
	w.expect("subscribed", "b")
	created := w.expect("event", "b").ev()

	done := make(chan struct{})
	go func() {
		v.srv.Shutdown()
		close(done)
	}()
	ends := map[string]wsMsg{}
	for {
		m, err := w.next()
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusGoingAway {
				t.Fatalf("closed with %v", err)
			}
			break
		}
		if m.Op != "end" || m.Reason != "shutdown" {
			t.Fatalf("frame %s", m.raw)
		}
		ends[m.ID] = m
	}
	log := v.readLog("t1")
	var last tether.Event
	json.Unmarshal(log[len(log)-1], &last)
	// Each end carries the cursor to resume from: a filtered subscription
	// resumes after the events it skipped.
	if len(ends) != 2 || ends["a"].Offset != last.Offset || ends["b"].Offset.Compare(created.Offset) < 0 {
		t.Fatalf("ends: %+v", ends)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if _, res, err := v.dialWS("", nil); err == nil || res.StatusCode != 503 {
		t.Fatalf("dial after shutdown: %v", err)
	}
}
