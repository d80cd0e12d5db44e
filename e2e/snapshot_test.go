package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// TestLateJoiner connects clients with no cursor in the middle of a run,
// to the run's stream and to the thread's. Each must get :ok, connected,
// then a snapshot at some offset X that equals the fold of the log up to
// and including X (runs.NewState + Apply over the events the server
// returns after the run), then exactly the log's events after X, up to the
// run.finished.
func TestLateJoiner(t *testing.T) {
	s := start(t, "")
	tid, rid := s.demoRun(t, "Who joins late?", `{"demo":{"tokens":800,"delay_ms":4}}`)
	eventually(t, 60*time.Second, "the run to have 50 events", func() bool {
		return len(s.readLog(t, "/v1/runs/"+rid+"/events")) >= 50
	})

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	runF := s.follow(ctx, "run stream", "/v1/runs/"+rid+"/events", followOptions{UntilRunFinished: true})
	threadF := s.follow(ctx, "thread stream", "/v1/threads/"+tid+"/events", followOptions{UntilRunFinished: true})
	for _, f := range []*follower{runF, threadF} {
		if err := f.wait(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
	}
	s.waitRunEnded(t, rid)
	log := s.readLog(t, "/v1/threads/"+tid+"/events")
	row := s.threadRow(t, tid)

	for _, f := range []*follower{runF, threadF} {
		conns := f.connections()
		if len(conns) != 1 {
			t.Fatalf("%s: %d connections, want 1", f.name, len(conns))
		}
		frames := conns[0]
		if len(frames) < 4 || !frames[0].IsComment || frames[0].Comment != "ok" || frames[1].Event != "connected" || frames[2].Event != "snapshot" {
			t.Fatalf("%s: the stream starts %+v, want :ok, connected, snapshot", f.name, frames[:min(3, len(frames))])
		}
		var snap tether.Snapshot
		if err := json.Unmarshal([]byte(frames[2].Data), &snap); err != nil {
			t.Fatalf("%s: snapshot: %v", f.name, err)
		}
		x := string(snap.Offset)
		if !frames[2].HasID || frames[2].ID != x {
			t.Errorf("%s: the snapshot's id is %q, its offset %q", f.name, frames[2].ID, x)
		}
		if snap.Reset {
			t.Errorf("%s: a snapshot with reset for a client with no cursor", f.name)
		}
		if len(snap.Runs) != 1 || snap.Runs[0].Status.Terminal() {
			t.Fatalf("%s: the snapshot's runs are %+v; want the one run, not yet finished (is the run too short?)", f.name, snap.Runs)
		}

		// The fold of the log up to X.
		st := runs.NewState(row)
		var suffix []logEvent
		for _, e := range log {
			if e.Offset > x {
				suffix = append(suffix, e)
				continue
			}
			var ev tether.Event
			if err := json.Unmarshal(e.Raw, &ev); err != nil {
				t.Fatalf("decode %s: %v", e.Raw, err)
			}
			if err := st.Apply(&ev); err != nil {
				t.Fatalf("fold %s: %v", e.Raw, err)
			}
		}
		if string(st.Offset()) != x {
			t.Fatalf("%s: the snapshot is at %s, which is not an event of the log (the fold stops at %s)", f.name, x, st.Offset())
		}
		want := st.Snapshot()
		if f == runF {
			want, _ = st.RunSnapshot(rid)
		}
		sameJSON(t, f.name+": snapshot", []byte(frames[2].Data), want)

		// Then exactly the events after X, up to run.finished.
		for i, e := range suffix {
			if e.Type == "run.finished" {
				suffix = suffix[:i+1]
				break
			}
		}
		sameSequence(t, f.name+": events after the snapshot", f.seen(), suffix)
	}
}

// sameJSON fails the test unless got (JSON) and the JSON of want are the
// same value.
func sameJSON(t testing.TB, what string, got []byte, want any) {
	t.Helper()
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	json.Unmarshal(wb, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s differs:\n  got  %s\n  want %s", what, got, wb)
	}
}
