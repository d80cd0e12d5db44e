package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/streams"
)

// failedReadStore fails the fail-th read of a thread's log (counted from
// when armed) with err.
type failedReadStore struct {
	store.Store
	armed atomic.Bool
	reads atomic.Int64
	fail  int64
	err   error
}

func (s *failedReadStore) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if s.armed.Load() && s.reads.Add(1) == s.fail {
		return nil, s.err
	}
	return s.Store.ReadEvents(ctx, threadID, after, limit)
}

func (s *failedReadStore) ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if s.armed.Load() && s.reads.Add(1) == s.fail {
		return nil, false, s.err
	}
	return s.Store.ReadPage(ctx, threadID, after, limit, maxBytes)
}

// An SSE stream whose read of the log fails after it started ends with a
// reconnect frame that says why, as protocol.md §5 asks of every stream
// the server ends itself (and as a WebSocket subscription ends with
// error): it was closed with nothing, so a client could not tell it from
// a network drop and backed off before resuming. What the store said
// stays on the server.
func TestSSEEndsWithReconnectWhenAReadFails(t *testing.T) {
	for _, c := range []struct {
		name         string
		err          error
		reason, code string
	}{
		{"fault", errors.New("sqlite: disk I/O error (SELECT offset, data FROM events)"), "error", "internal"},
		{"store down", tether.Errorf(tether.CodeUnavailable, "the store did not answer"), "unavailable", "unavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &failedReadStore{Store: testutil.OpenStore(t, ""), fail: 3, err: c.err}
			v := newEnvStore(t, st, api.Options{}, catchUpEngine())
			v.longThread("t1", 200)

			st.armed.Store(true)
			fs := v.sse("GET", "/v1/threads/t1/events?after=-1", nil).all()
			if len(eventFrames(fs)) == 0 {
				t.Fatal("no event before the failed read")
			}
			last := fs[len(fs)-1]
			var d struct {
				Reason string
				Error  struct{ Code, Message string }
			}
			if last.event != "reconnect" || last.id != "" || json.Unmarshal([]byte(last.data), &d) != nil ||
				d.Reason != c.reason || d.Error.Code != c.code || d.Error.Message == "" {
				t.Fatalf("last frame %+v, want reconnect %s with code %s", last, c.reason, c.code)
			}
			if strings.Contains(last.data, "sqlite") || strings.Contains(last.data, "history") {
				t.Fatalf("the frame tells what the server's store said: %s", last.data)
			}
		})
	}
}

// A Durable Streams SSE read of a thread log whose read of the log fails
// after it started ends (the protocol has no error event; the client's
// next request gets the error), and the server logs why: it ended with
// nothing in the log, so an operator could not tell a store fault from
// clients leaving.
func TestDurableStreamsSSEReadFailureLogged(t *testing.T) {
	var logs testutil.SyncBuffer
	st := &failedReadStore{Store: testutil.OpenStore(t, ""), err: errors.New("sqlite: disk I/O error")}
	v := newEnvStreams(t, st, api.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, catchUpEngine(), &streams.Options{ReadBytes: 512})
	v.longThread("t1", 200)

	st.fail = 2
	st.armed.Store(true)
	res := v.do("GET", "/v1/stream/threads/t1?offset=-1&live=sse", nil)
	if res.status != 200 || !strings.Contains(string(res.body), "event: data") {
		t.Fatalf("%d: %.200s", res.status, res.body)
	}
	if !strings.Contains(logs.String(), "disk I/O error") {
		t.Fatalf("the failed read is not in the log:\n%s", logs.String())
	}
	// Under the ID the answer carries, which the server gave it.
	if id := res.header.Get("X-Request-Id"); id == "" || !strings.Contains(logs.String(), "ended early\" path=/v1/stream/threads/t1 request_id="+id) {
		t.Fatalf("the log line does not carry the answer's request id %q:\n%s", id, logs.String())
	}
}
