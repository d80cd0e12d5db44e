package agui

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

func TestZZDump(t *testing.T) {
	os.MkdirAll("/tmp/h2/joins", 0o755)
	for seed := range 40 {
		l := randomLog(t, rand.New(rand.NewPCG(uint64(seed), 7)))
		out := map[string]any{}
		fr := func(frames []Frame) []json.RawMessage {
			var o []json.RawMessage
			for _, f := range frames {
				o = append(o, json.RawMessage(f.JSON()))
			}
			return o
		}
		out["full"] = fr(l.project(Options{}, 0, false))
		var joins [][]json.RawMessage
		for k := range l.events {
			joins = append(joins, fr(l.project(Options{}, k, true)))
		}
		out["joins"] = joins
		b, _ := json.Marshal(Messages(l.snaps[len(l.snaps)-1].Messages))
		out["final"] = json.RawMessage(b)
		s, _ := json.Marshal(l.snaps[len(l.snaps)-1].State)
		out["state"] = json.RawMessage(s)
		j, _ := json.Marshal(out)
		os.WriteFile(fmt.Sprintf("/tmp/h2/joins/%d.json", seed), j, 0o644)
	}
}
