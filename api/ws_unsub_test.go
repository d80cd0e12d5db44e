package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// An unsubscribe of an open subscription is answered by its end
// (unsubscribed), also when the subscription reaches its own end at the
// same moment: the run's run.finished, committed just before. The
// subscription's goroutine could pass its look for the unsubscribe, then
// queue its end run_finished, while the unsubscribe waited for it: the
// client got no answer to its unsubscribe (neither end unsubscribed nor
// not_found, which an unsubscribe after the end gets).
func TestWSUnsubscribeRacesRunEnd(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	w := v.ws("")
	const subs = 32
	for round := range 30 {
		tid := fmt.Sprintf("t%d", round)
		v.thread(tid)
		run, lease := v.extRun(tid)
		ids := make([]string, subs)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-%d", round, i)
			w.subscribe(ids[i], "run_id", run, "after", "now", "types", []string{"text.delta"})
			w.expect("subscribed", ids[i])
		}
		// Events the subscriptions skip, then the run's end: each
		// subscription looks through them all before it finds its end.
		batch := strings.Repeat(`{"type":"custom","name":"tick"},`, 500) + `{"type":"run.finished","status":"done"}`
		v.mustDo(200, "POST", "/v1/runs/"+run+"/events", "["+batch+"]", lease...)
		for _, id := range ids {
			w.send(map[string]any{"op": "unsubscribe", "id": id})
		}
		w.send(`{"op":"ping","id":"sync"}`)
		// Every unsubscribe is answered before the next client frame is
		// read: by the end unsubscribed, or by not_found after the
		// subscription's own end.
		ends := map[string]string{}
		answered := map[string]bool{}
		for synced := false; !synced; {
			m := w.read()
			switch {
			case m.Op == "pong" && m.ID == "sync":
				synced = true
			case m.Op == "end":
				if ends[m.ID] != "" {
					t.Fatalf("round %d: a second end: %s", round, m.raw)
				}
				ends[m.ID] = m.Reason
				answered[m.ID] = m.Reason == "unsubscribed"
			case m.Op == "error" && m.Error.Code == "not_found":
				if ends[m.ID] != "run_finished" || answered[m.ID] {
					t.Fatalf("round %d: %s after end %q", round, m.raw, ends[m.ID])
				}
				answered[m.ID] = true
			default:
				t.Fatalf("round %d: frame %s", round, m.raw)
			}
		}
		for _, id := range ids {
			if !answered[id] {
				t.Fatalf("round %d: the unsubscribe of %s was not answered (its end: %q)", round, id, ends[id])
			}
		}
	}
}
