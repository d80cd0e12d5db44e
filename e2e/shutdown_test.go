package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGracefulShutdown sends SIGTERM while thread and run streams are open
// on a long demo run and on an external worker's run. The process must exit
// 0 (and not hang on the streams); every stream must end with
// "event: reconnect", except the demo run's own stream, which may instead
// end with the run's run.finished (the run is aborted before streams are
// told to reconnect, and a run stream ends after its terminal event).
// After a restart the demo run is aborted (server_shutdown), the external
// run carries on under its lease, and the log holds everything the streams
// saw.
func TestGracefulShutdown(t *testing.T) {
	s := start(t, "", "--shutdown-grace", "1s")
	tid, rid := s.demoRun(t, "How do you stop gracefully?", `{"demo":{"tokens":5000,"delay_ms":5}}`)
	xtid, l := s.externalRun(t, "external")
	if res := s.appendEvents(t.Context(), l, message("x1", "hello")); res.Status != http.StatusOK {
		t.Fatalf("append: %d %v %s", res.Status, res.Err, res.Body)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	type watched struct {
		f         *follower
		threadID  string
		demoRunID bool // the demo run's own stream
	}
	var ws []watched
	add := func(path, threadID string, demoRun bool) {
		name := fmt.Sprintf("stream %d (%s)", len(ws), path)
		ws = append(ws, watched{s.follow(ctx, name, path, followOptions{After: "-1"}), threadID, demoRun})
	}
	for range 2 {
		add("/v1/threads/"+tid+"/events", tid, false)
		add("/v1/runs/"+rid+"/events", tid, true)
	}
	add("/v1/threads/"+xtid+"/events", xtid, false)
	add("/v1/runs/"+l.RunID+"/events", xtid, false)
	eventually(t, 60*time.Second, "every stream to see its events", func() bool {
		for _, w := range ws {
			if w.f.count() < 4 || (w.threadID == tid && w.f.count() < 50) {
				return false
			}
		}
		return true
	})

	status, took := s.terminate(30 * time.Second)
	t.Logf("tether exited %d, %v after SIGTERM", status, took.Round(time.Millisecond))
	if status != 0 {
		t.Fatalf("tether exited with status %d after SIGTERM, want 0 (-1: killed after 30s)", status)
	}
	for _, w := range ws {
		if err := w.f.wait(); err != nil {
			t.Fatalf("%s: %v", w.f.name, err)
		}
		conns := w.f.connections()
		if len(conns) != 1 || len(conns[0]) == 0 {
			t.Fatalf("%s: %d connections", w.f.name, len(conns))
		}
		frames := conns[0]
		end := frames[len(frames)-1]
		t.Logf("%s ended with %s %.80s", w.f.name, end.Event, end.Data)
		switch {
		case end.Event == "reconnect":
		case w.demoRunID && end.Event == "end" && frames[len(frames)-2].Event == "run.finished":
		default:
			t.Errorf("%s ended with %+v, want event: reconnect", w.f.name, end)
		}
	}

	s.restart()
	run, msgs := s.getRun(t, rid)
	if run.Status != "aborted" || run.Error == nil || run.Error.Code != "server_shutdown" {
		t.Errorf("the demo run is %s with error %+v, want aborted with code server_shutdown", run.Status, run.Error)
	}
	for _, m := range msgs {
		if m.Status == "running" {
			t.Errorf("message %s of the demo run is still running", m.ID)
		}
	}
	if x, _ := s.getRun(t, l.RunID); x.Status != "running" {
		t.Errorf("the external run is %s after the restart, want running (its lease is live)", x.Status)
	}
	logs := map[string]map[string]logEvent{
		tid:  logIndex(s.readLog(t, "/v1/threads/"+tid+"/events")),
		xtid: logIndex(s.readLog(t, "/v1/threads/"+xtid+"/events")),
	}
	for _, w := range ws {
		checkSeenInLog(t, w.f.name, w.f.seen(), logs[w.threadID])
	}
	if res := s.appendEvents(t.Context(), l, append(message("x2", "bye"),
		map[string]any{"type": "run.finished", "status": "done"})); res.Status != http.StatusOK {
		t.Errorf("the external worker's append after the restart: %d %v %s", res.Status, res.Err, res.Body)
	}
}

// TestShutdownDuringLongPolls sends SIGTERM while a worker long-polls for
// a run (POST /v1/workers/claim with wait_ms 30000, what an idle worker
// does all the time) and a client long-polls a thread's events
// (?wait=30000). Shutdown must not wait for those waits to run out: with
// --shutdown-grace 1s the process must exit 0 long before the 30 s are
// over.
func TestShutdownDuringLongPolls(t *testing.T) {
	s := start(t, "", "--shutdown-grace", "1s")
	tid := s.createThread(t)

	type answer struct {
		status int
		err    error
		took   time.Duration
	}
	claim, poll := make(chan answer, 1), make(chan answer, 1)
	wrote := make(chan struct{})
	var once sync.Once
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) }}
	go func() {
		t0 := time.Now()
		status, _, err := s.call(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, "/v1/workers/claim",
			map[string]any{"worker_id": "idle-worker", "agents": []string{"idle-agent"}, "wait_ms": 30000})
		claim <- answer{status, err, time.Since(t0)}
	}()
	go func() {
		t0 := time.Now()
		status, _, err := s.call(context.Background(), http.MethodGet, "/v1/threads/"+tid+"/events?after=-1&wait=30000", nil, "Accept", "application/json")
		poll <- answer{status, err, time.Since(t0)}
	}()
	<-wrote
	eventually(t, 30*time.Second, "the long poll to wait on the thread", func() bool { return s.metric(t, "tether_subscriptions") >= 1 })

	status, took := s.terminate(45 * time.Second)
	c, p := <-claim, <-poll
	t.Logf("tether exited %d, %v after SIGTERM; the claim ended after %v (%d %v), the poll after %v (%d %v)",
		status, took.Round(time.Millisecond), c.took.Round(time.Millisecond), c.status, c.err, p.took.Round(time.Millisecond), p.status, p.err)
	if status != 0 {
		t.Errorf("tether exited with status %d after SIGTERM, want 0 (-1: killed after 45s)", status)
	}
	if took > 20*time.Second {
		t.Errorf("tether took %v to exit after SIGTERM with --shutdown-grace 1s: it waited for the long polls (30 s) to time out instead of ending them", took.Round(time.Millisecond))
	}
}

// TestShutdownStalledStream sends SIGTERM while clients that read nothing
// catch up on a long log (30 MB: the streams' writes fill the sockets'
// buffers and block), on a Tether stream and on a Durable Streams SSE read.
// Such a client cannot take its last frame, and the server must not wait
// on it for --write-timeout: it must exit 0 soon after its other work is
// done, with the clients' connections closed.
func TestShutdownStalledStream(t *testing.T) {
	s := start(t, "", "--shutdown-grace", "1s", "--write-timeout", "60s", "--limit-append-bytes", "0")
	tid, l := s.externalRun(t, "stalled reader")
	big := strings.Repeat("y", 500<<10)
	batch := []map[string]any{{"type": "message.started", "message_id": "m", "role": "assistant"}}
	for i := range 60 {
		batch = append(batch, map[string]any{"type": "text.delta", "message_id": "m", "delta": big})
		if res := s.appendEvents(t.Context(), l, batch); res.Status != http.StatusOK {
			t.Fatalf("append %d: %d %v %s", i, res.Status, res.Err, res.Body)
		}
		batch = batch[:0]
	}

	// The thread's stream, and the same log read as a Durable Stream (an
	// SSE response that net/http writes, not a connection the server took
	// over).
	var conns []net.Conn
	for _, path := range []string{"/v1/threads/" + tid + "/events?after=-1", "/v1/stream/threads/" + tid + "?offset=-1&live=sse"} {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, s.addr)
		head := make([]byte, 12)
		if _, err := io.ReadFull(c, head); err != nil || string(head) != "HTTP/1.1 200" {
			t.Fatalf("stream %s: %q %v", path, head, err)
		}
		conns = append(conns, c)
	}
	// The clients read no more. However far the server got, what is left
	// (of 30 MB) is more than the socket's buffers hold, the reconnect
	// frame included.
	eventually(t, 30*time.Second, "the stream to subscribe", func() bool { return s.metric(t, "tether_subscriptions") >= 1 })
	time.Sleep(time.Second) // for the writes to fill the buffers and block

	status, took := s.terminate(90 * time.Second)
	t.Logf("tether exited %d, %v after SIGTERM", status, took.Round(time.Millisecond))
	if status != 0 {
		t.Fatalf("tether exited with status %d after SIGTERM, want 0 (-1: killed after 90s)", status)
	}
	if took > 20*time.Second {
		t.Errorf("tether took %v to exit after SIGTERM: it waited for the stalled stream's write (--write-timeout 60s)", took.Round(time.Millisecond))
	}
	// The connections are closed: the clients read the rest and then EOF.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("stalled client %d's connection after the exit: %v, want EOF", i, err)
		}
	}
}

// TestShutdownFinishesRequestsInFlight sends SIGTERM while a worker's
// append is on its way (its body arrives 2.5 s later, as from a slow link)
// and while another connection was opened but has sent nothing. The server
// must wait for the append, answer it and keep it, as it says it waits for
// requests in flight, and must not wait on the idle connection.
func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	s := start(t, "", "--shutdown-grace", "1s")
	tid, l := s.externalRun(t, "slow link")
	body := `[{"type":"message.started","message_id":"slow","role":"assistant"}]`
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idle, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// With Expect: 100-continue the server says when its handler starts
	// reading the body: then the append is in flight.
	fmt.Fprintf(c, "POST /v1/runs/%s/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTether-Lease: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		l.RunID, s.addr, l.Token, len(body))
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("before the body: %q %v", line, err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "\r\n" {
		t.Fatalf("after 100 Continue: %q %v", line, err)
	}
	if _, err := fmt.Fprint(c, body[:10]); err != nil {
		t.Fatal(err)
	}

	type exit struct {
		status int
		took   time.Duration
	}
	exited := make(chan exit, 1)
	go func() {
		status, took := s.terminate(60 * time.Second)
		exited <- exit{status, took}
	}()
	time.Sleep(2500 * time.Millisecond) // the slow link
	if _, err := fmt.Fprint(c, body[10:]); err != nil {
		t.Fatalf("the rest of the body: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the append in flight at SIGTERM got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the append in flight at SIGTERM: %d", resp.StatusCode)
	}
	e := <-exited
	t.Logf("tether exited %d, %v after SIGTERM", e.status, e.took.Round(time.Millisecond))
	if e.status != 0 {
		t.Fatalf("tether exited with status %d after SIGTERM, want 0", e.status)
	}

	s.restart()
	found := false
	for _, ev := range s.readLog(t, "/v1/threads/"+tid+"/events") {
		found = found || ev.MessageID == "slow"
	}
	if !found {
		t.Error("the append answered 200 at shutdown is not in the log")
	}
}
