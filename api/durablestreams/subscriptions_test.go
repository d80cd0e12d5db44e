package durablestreams_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/internal/testutil"
)

// claimed is a pull-wake claim as a worker gets it.
type claimed struct {
	WakeID     string `json:"wake_id"`
	Generation int64  `json:"generation"`
	Token      string `json:"token"`
	Streams    []struct {
		Path        string `json:"path"`
		AckedOffset string `json:"acked_offset"`
		TailOffset  string `json:"tail_offset"`
	} `json:"streams"`
}

// claim claims the pending wake of a pull-wake subscription; ok is false
// for NO_PENDING_WORK.
func (s *server) claim(sub string) (c claimed, ok bool) {
	s.t.Helper()
	resp, body := s.do("POST", "__ds/subscriptions/"+sub+"/claim", `{"worker":"w1"}`, "Content-Type", "application/json")
	if resp.StatusCode == 409 {
		return c, false
	}
	s.want(resp, body, 200)
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		s.t.Fatal(err)
	}
	return c, true
}

// done acknowledges a claimed wake (acks: stream, offset pairs) and ends
// it; it returns whether a new wake started at once.
func (s *server) done(sub string, c claimed, acks ...string) bool {
	s.t.Helper()
	type ack struct {
		Stream string `json:"stream"`
		Offset string `json:"offset"`
	}
	req := struct {
		WakeID     string `json:"wake_id"`
		Generation int64  `json:"generation"`
		Acks       []ack  `json:"acks"`
		Done       bool   `json:"done"`
	}{WakeID: c.WakeID, Generation: c.Generation, Acks: []ack{}, Done: true}
	for i := 0; i+1 < len(acks); i += 2 {
		req.Acks = append(req.Acks, ack{acks[i], acks[i+1]})
	}
	b, _ := json.Marshal(req)
	resp, body := s.do("POST", "__ds/subscriptions/"+sub+"/ack", string(b), "Content-Type", "application/json",
		"Authorization", "Bearer "+c.Token)
	s.want(resp, body, 200)
	var res struct {
		NextWake bool `json:"next_wake"`
	}
	_ = json.Unmarshal([]byte(body), &res)
	return res.NextWake
}

// TestHTTPSubscriptionForgetsDeletedStreams: a subscription stops
// following a stream when it is deleted (as the protocol's reference
// server does). It did not: a stream deleted before its data was
// acknowledged stayed pending for good (its tail, the zero offset, sorts
// after the "-1" it was followed from), so every wake that ended started
// another, each one written to the wake stream; and a stream created again
// at the path was followed from an offset of the old one, which reading
// it from answers 410.
func TestHTTPSubscriptionForgetsDeletedStreams(t *testing.T) {
	s := jobsSubscribed(t)
	follows := func(path string) bool {
		resp, body := s.do("GET", "__ds/subscriptions/jobs", "")
		s.want(resp, body, 200)
		var sub struct {
			Streams []struct{ Path string } `json:"streams"`
		}
		if err := json.Unmarshal([]byte(body), &sub); err != nil {
			t.Fatal(err)
		}
		for _, st := range sub.Streams {
			if st.Path == path {
				return true
			}
		}
		return false
	}

	// Deleted before anyone acknowledged it: nothing is pending.
	resp, body := s.do("PUT", "jobs/1", "one", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	testutil.Eventually(t, 5*time.Second, "the subscription to follow jobs/1", func() bool { return follows("jobs/1") })
	resp, body = s.do("DELETE", "jobs/1", "")
	s.want(resp, body, 204)
	if c, ok := s.claim("jobs"); ok {
		if s.done("jobs", c) {
			t.Fatalf("a wake ended with nothing acknowledged starts another for the deleted stream: %+v", c.Streams)
		}
	}
	if c, ok := s.claim("jobs"); ok {
		t.Fatalf("pending work after jobs/1 was deleted: %+v", c.Streams)
	}
	testutil.Eventually(t, 5*time.Second, "the subscription to stop following jobs/1", func() bool { return !follows("jobs/1") })

	// Created again: followed from its start, not from an offset of the
	// stream that was deleted.
	resp, body = s.do("PUT", "jobs/2", "a", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	var c claimed
	testutil.Eventually(t, 5*time.Second, "a wake for jobs/2", func() bool {
		var ok bool
		c, ok = s.claim("jobs")
		return ok
	})
	tail := c.Streams[0].TailOffset
	if c.Streams[0].Path != "jobs/2" || s.done("jobs", c, "jobs/2", tail) {
		t.Fatalf("wake of jobs/2: %+v", c.Streams)
	}
	resp, body = s.do("DELETE", "jobs/2", "")
	s.want(resp, body, 204)
	resp, body = s.do("PUT", "jobs/2", "b", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	testutil.Eventually(t, 5*time.Second, "a wake for jobs/2 that reads from a position of it", func() bool {
		c, ok := s.claim("jobs")
		if !ok {
			return false
		}
		acked := c.Streams[0].AckedOffset
		resp, body := s.do("GET", fmt.Sprintf("jobs/2?offset=%s", acked), "")
		s.do("POST", "__ds/subscriptions/jobs/release", fmt.Sprintf(`{"wake_id":%q,"generation":%d}`, c.WakeID, c.Generation),
			"Content-Type", "application/json", "Authorization", "Bearer "+c.Token)
		return resp.StatusCode == 200 && body == "b"
	})
}

// TestHTTPSubscriptionPatternCost: matching a pattern against a path took
// time exponential in the pattern's "**" segments, and a subscription's
// pattern is matched against every stream when it is created and against
// every stream appended to after, with the subscriptions locked: one
// pattern of ten "**" and one stream of a hundred segments kept the server
// matching for good, and every subscription request waiting. A pattern is
// matched in time proportional to its length times the path's.
func TestHTTPSubscriptionPatternCost(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	long := strings.TrimSuffix(strings.Repeat("a/", 100), "/")
	resp, body := s.do("PUT", long, "x", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	pattern := strings.Repeat("**/", 10) + "z"
	resp, body = s.do("PUT", "__ds/subscriptions/costly", fmt.Sprintf(`{"type":"pull-wake","pattern":%q,"wake_stream":"w"}`, pattern),
		"Content-Type", "application/json")
	s.want(resp, body, 201)
	resp, body = s.do("POST", long, "y", "Content-Type", "text/plain")
	s.want(resp, body, 204)
	resp, body = s.do("PUT", long+"/z", "matches", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	testutil.Eventually(t, 5*time.Second, "the subscription to follow the stream its pattern matches", func() bool {
		resp, body := s.do("GET", "__ds/subscriptions/costly", "")
		s.want(resp, body, 200)
		return strings.Contains(body, `"path":"`+long+`/z"`) && !strings.Contains(body, `"path":"`+long+`"`)
	})
}

// TestHTTPSubscriptionAcksTheStreamItNames: a stream whose path ends with
// a slash is a stream of its own, and a pattern follows it under that
// path, as a wake names it; an ack naming it so was refused (the path was
// trimmed of its slashes, naming another stream), so it could never be
// acknowledged and every wake that ended started another.
func TestHTTPSubscriptionAcksTheStreamItNames(t *testing.T) {
	s := jobsSubscribed(t)
	resp, body := s.do("PUT", "jobs/x/", "slash", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	var c claimed
	testutil.Eventually(t, 5*time.Second, "a wake for jobs/x/", func() bool {
		var ok bool
		c, ok = s.claim("jobs")
		return ok
	})
	if len(c.Streams) != 1 || c.Streams[0].Path != "jobs/x/" {
		t.Fatalf("wake: %+v", c.Streams)
	}
	if s.done("jobs", c, c.Streams[0].Path, c.Streams[0].TailOffset) {
		t.Fatal("a new wake started after everything was acknowledged")
	}
	if c, ok := s.claim("jobs"); ok {
		t.Fatalf("pending work after jobs/x/ was acknowledged: %+v", c.Streams)
	}
}

// jobsSubscribed is a server with a pull-wake subscription "jobs" to the
// streams jobs/*, woken on the stream "wakes".
func jobsSubscribed(t *testing.T) *server {
	t.Helper()
	s := newServer(t, durablestreams.Options{})
	resp, body := s.do("PUT", "wakes", "", "Content-Type", "application/json")
	s.want(resp, body, 201)
	resp, body = s.do("PUT", "__ds/subscriptions/jobs", `{"type":"pull-wake","pattern":"jobs/*","wake_stream":"wakes"}`,
		"Content-Type", "application/json")
	s.want(resp, body, 201)
	return s
}
