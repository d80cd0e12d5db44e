package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// pollAnswer is the JSON answer of a catch-up or long poll.
type pollAnswer struct {
	Events   []json.RawMessage `json:"events"`
	Next     tether.Offset     `json:"next_offset"`
	UpToDate bool              `json:"up_to_date"`
}

// pollWaiting starts a long poll of thread tid after cursor and returns
// its answer's channel once the poll waits in the hub.
func (v *env) pollWaiting(tid, cursor string) <-chan *resp {
	v.t.Helper()
	subs := v.e.Hub().Stats().Subscribers
	done := make(chan *resp, 1)
	go func() {
		done <- v.do("GET", "/v1/threads/"+tid+"/events?wait=20000&after="+cursor, nil, "Accept", "application/json")
	}()
	testutil.Eventually(v.t, 10*time.Second, "the poll waits", func() bool { return v.e.Hub().Stats().Subscribers > subs })
	return done
}

// A thread deleted while a long poll waits on it answers 404, as a poll
// that starts after the delete does, not 200 with nothing: the wait's end
// was taken for every error of the wait.
func TestPollThreadDeletedWhileWaiting(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	done := v.pollWaiting("t1", "now")
	v.mustDo(204, "DELETE", "/v1/threads/t1", nil)
	if r := <-done; r.status != 404 || r.code() != "not_found" {
		t.Fatalf("poll of a thread deleted meanwhile: %d %s, want 404 not_found", r.status, r.body)
	}
}

// An append larger than a subscriber's buffer, made while a long poll
// waits, is answered 200 (a subscriber cut by it answers not up to date,
// so the client polls again at once), and the polls until up to date have
// every event.
func TestPollAppendLargerThanBuffer(t *testing.T) {
	eopts := engine.Options{}
	eopts.Hub.BufferBytes = 32 << 10
	v := newEnvEngine(t, api.Options{}, eopts)
	v.thread("t1")
	run, lease := v.extRun("t1")
	var th struct{ Thread tether.Thread }
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&th)
	done := v.pollWaiting("t1", string(th.Thread.LastOffset))
	delta := `{"type":"text.delta","message_id":"a1","delta":"` + strings.Repeat("x", 8<<10) + `"}`
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", "["+strings.Repeat(delta+",", 7)+delta+"]", lease...)

	r := <-done
	if r.status != 200 {
		t.Fatalf("poll: %d %s", r.status, r.body)
	}
	var got []json.RawMessage
	var p pollAnswer
	r.json(&p)
	for got = p.Events; !p.UpToDate; got = append(got, p.Events...) {
		v.mustDo(200, "GET", "/v1/threads/t1/events?after="+string(p.Next), nil, "Accept", "application/json").json(&p)
	}
	if len(got) != 8 {
		t.Fatalf("got %d events, want the 8 appended", len(got))
	}
}

// A wait longer than the server allows waits as long as it allows, however
// long: a wait in milliseconds that overflowed a time.Duration was
// answered at once.
func TestPollWaitOverLimit(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	subs := v.e.Hub().Stats().Subscribers
	for _, ms := range []string{"60000", "10000000000000", "9223372036854775807"} {
		// The last round's poll and the runner's follower of its run
		// close after their answers: count from none of theirs.
		testutil.Eventually(t, 10*time.Second, "the last round's subscribers gone", func() bool {
			return v.e.Hub().Stats().Subscribers == subs
		})
		done := make(chan *resp, 1)
		go func() {
			done <- v.do("GET", "/v1/threads/t1/events?after=now&wait="+ms, nil, "Accept", "application/json")
		}()
		testutil.Eventually(t, 10*time.Second, "the poll of wait="+ms+" waits", func() bool {
			select {
			case r := <-done:
				t.Fatalf("wait=%s answered at once: %d %s", ms, r.status, r.body)
			default:
			}
			return v.e.Hub().Stats().Subscribers > subs
		})
		run := v.demoRun("t1", `{"tokens":1}`)
		var p pollAnswer
		if r := <-done; r.status != 200 {
			t.Fatalf("wait=%s: %d %s", ms, r.status, r.body)
		} else if r.json(&p); len(p.Events) == 0 {
			t.Fatalf("wait=%s: no events: %s", ms, r.body)
		}
		v.waitRun(run, tether.RunDone)
	}
}
