package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// stateRun starts a run of agent "graph" on thread t1 and returns the path
// its worker appends to and the lease header.
func stateRun(t *testing.T, v *env) (string, []string) {
	t.Helper()
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":0}`)
	v.thread("t1")
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"graph"}`).json(&run)
	var claim struct {
		Lease struct{ Token string }
	}
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":1000}`).json(&claim)
	return "/v1/runs/" + run.ID + "/events", []string{"Tether-Lease", claim.Lease.Token}
}

// A thread's state is bounded in size, however small the patches that grow
// it: copies of 100 bytes each add up to 1 MiB, so without a bound on the
// whole a few appends made a state of many MiB. The append that would go
// over is too_large and writes nothing.
func TestStateSizeBounded(t *testing.T) {
	// Each append folds and measures a state of up to 16 MiB: under the
	// race detector on a busy machine one may take longer than the
	// default test lease of 5 s, which its append renews.
	v := newEnvEngine(t, api.Options{}, engine.Options{AcceptAgent: func(n string) bool { return n == "demo" }, LeaseTTL: time.Minute})
	path, lease := stateRun(t, v)
	big := strings.Repeat("x", 900<<10)
	v.mustDo(200, "POST", path, `[{"type":"state.snapshot","state":{"a":"`+big+`"}}]`, lease...)
	refused := -1
	for i := range 20 {
		r := v.do("POST", path, fmt.Sprintf(`[{"type":"state.delta","patch":[{"op":"copy","from":"/a","path":"/b%d"}]}]`, i), lease...)
		if r.status == 413 && r.code() == "too_large" {
			refused = i
			break
		}
		if r.status != 200 {
			t.Fatalf("copy %d: %d %s", i, r.status, r.body)
		}
	}
	if refused < 0 {
		t.Fatal("20 copies of 900 KiB (18 MiB of state) were all accepted")
	}
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	var st map[string]string
	if err := json.Unmarshal(snap.State, &st); err != nil || len(st) != refused+1 {
		t.Fatalf("after the refusal of copy %d the state has %d keys (%v), want %d", refused, len(st), err, refused+1)
	}
	if len(snap.State) > 16<<20 {
		t.Fatalf("state of %d bytes", len(snap.State))
	}
	// What removes keeps working.
	v.mustDo(200, "POST", path, `[{"type":"state.delta","patch":[{"op":"remove","path":"/b0"}]}]`, lease...)
}

// A thread's state is bounded in depth (255 levels): each patch's body nests at most 256
// levels, but a patch may add its value at the end of a deep path, so
// without a bound on the whole two patches made a state Python's json cannot
// read. The append that would go over is too_large and writes nothing.
func TestStateDepthBounded(t *testing.T) {
	v := newEnv(t, api.Options{})
	path, lease := stateRun(t, v)
	deep := strings.Repeat(`{"x":`, 200) + "1" + strings.Repeat("}", 200)
	v.mustDo(200, "POST", path, `[{"type":"state.snapshot","state":{"d":`+deep+`,"e":`+deep+`}}]`, lease...)
	ptr := "/d" + strings.Repeat("/x", 199) + "/y"
	r := v.do("POST", path, `[{"type":"state.delta","patch":[{"op":"add","path":"`+ptr+`","value":`+deep+`}]}]`, lease...)
	if r.status != 413 || r.code() != "too_large" {
		t.Fatalf("a patch making the state 401 levels deep: %d %s", r.status, r.body)
	}
	// Nor through a move or a copy.
	for _, op := range []string{"move", "copy"} {
		r := v.do("POST", path, `[{"type":"state.delta","patch":[{"op":"`+op+`","from":"/e","path":"`+ptr+`"}]}]`, lease...)
		if r.status != 413 || r.code() != "too_large" {
			t.Fatalf("a %s making the state 401 levels deep: %d %s", op, r.status, r.body)
		}
	}
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if want := `{"d":` + deep + `,"e":` + deep + `}`; string(snap.State) != want {
		t.Fatalf("the refused patches changed the state: %.80s", snap.State)
	}
	// Up to the bound is fine: 255 levels (a front end sends the state
	// back one level inside a body of at most 256), and not one more.
	over := strings.Repeat(`{"x":`, 55) + "1" + strings.Repeat("}", 55)
	if r := v.do("POST", path, `[{"type":"state.delta","patch":[{"op":"add","path":"`+ptr+`","value":`+over+`}]}]`, lease...); r.status != 413 {
		t.Fatalf("a patch making the state 256 levels deep: %d %s", r.status, r.body)
	}
	ok := strings.Repeat(`{"x":`, 54) + "1" + strings.Repeat("}", 54)
	v.mustDo(200, "POST", path, `[{"type":"state.delta","patch":[{"op":"add","path":"`+ptr+`","value":`+ok+`}]}]`, lease...)
}
