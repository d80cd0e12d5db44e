package api_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// TestErrorEchoBounded: an error message quotes what a client sent (an
// agent name, a run, message or request ID) at most in part, however long
// it was; and an agent name on run creation is 1 to 255 bytes, as claims
// and declarations have it.
func TestErrorEchoBounded(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	runID := v.demoRun("t1", `{"delay_ms":0}`)
	v.waitRun(runID, "done")
	long := strings.Repeat("a", 8000)
	for name, r := range map[string]*resp{
		"agent":            v.do("POST", "/v1/threads/t1/runs", `{"agent":"`+long+`"}`),
		"run":              v.do("GET", "/v1/runs/"+long, nil),
		"cancel":           v.do("POST", "/v1/runs/"+long+"/cancel", nil),
		"input request_id": v.do("POST", "/v1/runs/"+runID+"/input", `{"request_id":"`+long+`","value":1}`),
		"final run_id":     v.do("GET", "/v1/threads/t1/final-answer?run_id="+long, nil),
		"message_id":       v.do("GET", "/v1/threads/t1/events?message_id="+long, nil),
		"run events":       v.do("GET", "/v1/runs/"+long+"/events", nil),
	} {
		// The streams answer 200 and end with the error (protocol.md §5).
		if r.status < 400 && r.status != 200 || len(r.body) > 600 {
			t.Errorf("%s: %d, %d bytes: %.300s", name, r.status, len(r.body), r.body)
		}
	}
	r := v.do("POST", "/v1/threads/t1/runs", `{"agent":"`+strings.Repeat("a", 256)+`"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "255 bytes") {
		t.Errorf("agent name of 256 bytes: %d %s", r.status, r.body)
	}
}
