package api_test

import (
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

func TestProducerHeaders(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["echo"],"wait_ms":0}`)
	v.thread("t1")
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"echo"}`).json(&run)
	var claim struct{ Lease struct{ Token string } }
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["echo"],"wait_ms":1000}`).json(&claim)
	path := "/v1/runs/" + run.ID + "/events"
	hdr := func(epoch, seq string) []string {
		return []string{"Tether-Lease", claim.Lease.Token, "Producer-Id", "w", "Producer-Epoch", epoch, "Producer-Seq", seq}
	}
	body := `[{"type":"custom","name":"x"}]`

	r := v.mustDo(200, "POST", path, body, hdr("0", "0")...)
	if r.header.Get("Producer-Epoch") != "0" || r.header.Get("Producer-Seq") != "0" {
		t.Fatalf("headers: %v", r.header)
	}
	r = v.mustDo(204, "POST", path, body, hdr("0", "0")...)
	if len(r.body) != 0 || r.header.Get("Producer-Seq") != "0" {
		t.Fatalf("duplicate: %q %v", r.body, r.header)
	}
	r = v.mustDo(409, "POST", path, body, hdr("0", "7")...)
	if r.code() != "conflict" || r.header.Get("Producer-Expected-Seq") != "1" || r.header.Get("Producer-Received-Seq") != "7" {
		t.Fatalf("gap: %s %v", r.body, r.header)
	}
	v.mustDo(200, "POST", path, body, hdr("2", "0")...)
	r = v.mustDo(403, "POST", path, body, hdr("1", "5")...)
	if r.code() != "forbidden" || r.header.Get("Producer-Epoch") != "2" {
		t.Fatalf("stale epoch: %s %v", r.body, r.header)
	}
	for _, bad := range [][]string{
		{"Tether-Lease", claim.Lease.Token, "Producer-Id", "w"},
		hdr("-1", "0"), hdr("01", "0"), hdr("0", "1.5"), hdr("0", "9007199254740992"), hdr("x", "0"),
	} {
		if r := v.mustDo(400, "POST", path, body, bad...); r.code() != "bad_request" {
			t.Fatalf("%v: %s", bad, r.body)
		}
	}
	// run.created, run.started and the two accepted appends; nothing else.
	if n := logLen(t, v, "t1"); n != 4 {
		t.Fatalf("log has %d events, want 4", n)
	}
}
