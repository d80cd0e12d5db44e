package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// A subscription's parameter given twice (?after=a&after=b) is refused
// bad_request, on every path that reads it, as a Durable Streams read
// refuses a repeated offset: which of the two the server would take is
// not the client's to guess. The first was taken and the second ignored.
func TestRepeatedSubscriptionParameter(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	rid := v.demoRun("t1", `{"tokens":3,"delay_ms":0}`)
	v.waitRun(rid, tether.RunDone)
	var p struct {
		Events []struct{ Offset string }
	}
	v.mustDo(200, "GET", "/v1/threads/t1/events?after=-1", nil, "Accept", "application/json").json(&p)
	a, b := p.Events[0].Offset, p.Events[1].Offset
	sse := []string{"Accept", "text/event-stream"}
	js := []string{"Accept", "application/json"}
	cases := []struct {
		name, path string
		hdr        []string
	}{
		{"thread SSE after", "/v1/threads/t1/events?after=" + a + "&after=" + b, sse},
		{"thread SSE after, one empty", "/v1/threads/t1/events?after=" + a + "&after=", sse},
		{"thread JSON after", "/v1/threads/t1/events?after=" + a + "&after=" + b, js},
		{"run SSE after", "/v1/runs/" + rid + "/events?after=" + a + "&after=" + b, sse},
		{"run JSON after", "/v1/runs/" + rid + "/events?after=" + a + "&after=" + b, js},
		{"Last-Event-ID", "/v1/threads/t1/events", []string{"Last-Event-ID", a, "Last-Event-ID", b}},
		{"JSON wait", "/v1/threads/t1/events?after=" + a + "&wait=0&wait=1000", js},
		{"types", "/v1/threads/t1/events?after=" + a + "&types=text.delta&types=run.finished", js},
		{"message_id", "/v1/runs/" + rid + "/events?message_id=a&message_id=b", js},
		{"AG-UI thread after", "/v1/ag-ui/threads/t1/events?after=" + a + "&after=" + b, nil},
		{"AG-UI run after", "/v1/ag-ui/threads/t1/runs/" + rid + "/events?after=" + a + "&after=" + b, nil},
		{"AI SDK resume after", "/v1/ai-sdk/demo/chat/t1/stream?run_id=" + rid + "&after=" + a + "&after=" + b, nil},
		{"AI SDK resume run_id", "/v1/ai-sdk/demo/chat/t1/stream?run_id=" + rid + "&run_id=run_x&after=" + a, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", v.url+c.path, nil)
			for i := 0; i+1 < len(c.hdr); i += 2 {
				req.Header.Add(c.hdr[i], c.hdr[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", res.StatusCode)
			}
			body, _ := io.ReadAll(res.Body)
			var e struct {
				Error struct{ Code, Message string }
			}
			if json.Unmarshal(body, &e) != nil || e.Error.Code != "bad_request" {
				t.Fatalf("body %s, want code bad_request", body)
			}
		})
	}
}
