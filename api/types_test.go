package api_test

import (
	"net/http"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// A ?types= filter naming what is no event type (a typo, an empty name)
// is bad_request before a stream starts: the set of types is closed
// (protocol.md §3; extensions are custom events), so such a filter could
// only ever deliver nothing, which looked like an empty thread. Every
// type of the log, the server's own included, is still a filter.
func TestUnknownTypeFilter(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	rid := v.demoRun("t1", `{"tokens":3,"delay_ms":0}`)
	v.waitRun(rid, tether.RunDone)
	for _, types := range []string{"txt.delta", "text.delta,txt.delta", "text.delta,", ",", "Text.Delta"} {
		for _, path := range []string{"/v1/threads/t1/events?after=-1&types=", "/v1/runs/" + rid + "/events?after=-1&types="} {
			for _, accept := range []string{"application/json", "text/event-stream"} {
				req, _ := http.NewRequest("GET", v.url+path+types, nil)
				req.Header.Set("Accept", accept)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusBadRequest {
					t.Errorf("%s%s (%s): status %d, want 400", path, types, accept, res.StatusCode)
				}
			}
		}
	}
	var p struct {
		Events []tether.Event
	}
	v.mustDo(200, "GET", "/v1/runs/"+rid+"/events?after=-1&types=run.created,run.started,custom,run.finished", nil, "Accept", "application/json").json(&p)
	if len(p.Events) != 3 || p.Events[2].Type != tether.EventRunFinished {
		t.Fatalf("known types filter: %+v", p.Events)
	}
}
