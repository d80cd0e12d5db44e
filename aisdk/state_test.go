package aisdk

import (
	"encoding/json"
	"testing"
)

// TestStateChunks: the thread's state reaches useChat as transient data
// chunks (onData): data-state with the whole value for state.snapshot,
// data-state-delta with the patch for state.delta, and a rebuild starts
// with the state as of its snapshot.
func TestStateChunks(t *testing.T) {
	evs := loadVectors(t)["14_thread_state"]
	if evs == nil {
		t.Fatal("no vector 14_thread_state")
	}
	run := runsOf(evs)[0]
	var snaps, deltas int
	for _, c := range live(run, evs) {
		switch c.Type {
		case ChunkState:
			snaps++
		case ChunkStateDelta:
			deltas++
			var patch []map[string]any
			if err := json.Unmarshal(c.Data, &patch); err != nil || len(patch) == 0 {
				t.Errorf("delta %s: not a JSON Patch", c.Data)
			}
		default:
			continue
		}
		if !c.Transient {
			t.Errorf("%s is not transient", c.Type)
		}
	}
	if snaps == 0 || deltas == 0 {
		t.Fatalf("%d data-state, %d data-state-delta chunks", snaps, deltas)
	}
	final := fold(t, evs)
	snap, _ := final.RunSnapshot(run.ID)
	pre, _ := Prelude(snap)
	if len(pre) == 0 || pre[0].Type != ChunkState || string(pre[0].Data) != string(snap.State) || len(snap.State) == 0 {
		t.Fatalf("rebuild starts with %+v, want the state %s", pre, snap.State)
	}
}
