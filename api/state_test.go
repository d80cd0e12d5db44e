package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// A worker sets and patches the thread's state; every snapshot carries it
// (GET, SSE, JSON catch-up), a malformed patch is bad_request and one that
// does not apply conflict, and neither writes anything.
func TestThreadStateOverHTTP(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":0}`)
	v.thread("t1")
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if snap.State != nil {
		t.Fatalf("a new thread has state %s", snap.State)
	}
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"graph"}`).json(&run)
	var claim struct {
		Lease struct{ Token string }
	}
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":1000}`).json(&claim)
	lease := []string{"Tether-Lease", claim.Lease.Token}
	path := "/v1/runs/" + run.ID + "/events"
	v.mustDo(200, "POST", path, `[{"type":"state.snapshot","state":{"steps":[]}},{"type":"state.delta","patch":[{"op":"add","path":"/steps/-","value":"plan"}]}]`, lease...)

	for _, c := range []struct {
		body string
		code int
	}{
		{`[{"type":"state.delta","patch":{"op":"add"}}]`, 400},
		{`[{"type":"state.delta","patch":[{"op":"remove","path":"/nope"}]}]`, 409},
		{`[{"type":"state.delta","patch":[{"op":"add","path":"/x","value":1}]},{"type":"state.delta","patch":[{"op":"test","path":"/x","value":2}]}]`, 409},
		{`[{"type":"state.snapshot"}]`, 400},
	} {
		if r := v.do("POST", path, c.body, lease...); r.status != c.code {
			t.Fatalf("%s: %d %s", c.body, r.status, r.body)
		}
	}

	want := `{"steps":["plan"]}`
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if string(snap.State) != want {
		t.Fatalf("GET: state %s, want %s", snap.State, want)
	}
	s := v.sse("GET", "/v1/threads/t1/events", nil)
	defer s.close()
	for {
		f, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.event != "snapshot" {
			continue
		}
		var got tether.Snapshot
		if err := json.Unmarshal([]byte(f.data), &got); err != nil || string(got.State) != want {
			t.Fatalf("SSE snapshot: %s (%v)", f.data, err)
		}
		break
	}
	r := v.mustDo(200, "GET", "/v1/threads/t1/events?after=0000000001_0000000000000001", nil, "Accept", "application/json")
	if !strings.Contains(string(r.body), `"state":`+want) {
		t.Fatalf("JSON reset snapshot: %s", r.body)
	}
}
