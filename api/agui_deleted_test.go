package api_test

import (
	"io"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// TestAGUIResumedJoinEndsWithRunErrorWhenDeleted: a stream joined from a
// cursor after its run's RUN_STARTED (the frames up to it folded, not
// sent), or from the tail, mid-run, ends with RUN_ERROR thread_deleted
// when the thread is deleted, as a stream that sent the RUN_STARTED does
// (docs/ag-ui.md, Resuming): the run the client has open ends. The writer
// knew a run was open only from a RUN_STARTED it sent itself, so these
// streams ended cleanly with nothing, and left the client's run open.
func TestAGUIResumedJoinEndsWithRunErrorWhenDeleted(t *testing.T) {
	for _, tc := range []struct{ name, path, hdr, after string }{
		{"thread from a cursor", "/v1/ag-ui/threads/t1/events", "Last-Event-ID", "cursor"},
		{"run from a cursor", "/v1/ag-ui/threads/t1/runs/current/events", "Last-Event-ID", "cursor"},
		{"thread from now", "/v1/ag-ui/threads/t1/events?after=now", "", ""},
		{"run from now", "/v1/ag-ui/threads/t1/runs/current/events?after=now", "", ""},
		{"thread with a prelude", "/v1/ag-ui/threads/t1/events", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnvEngine(t, api.Options{}, engine.Options{})
			v.thread("t1")
			run, lease := v.extRun("t1")
			v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"hello"}]`, lease...)
			// The cursor: the id of the text's frame, after RUN_STARTED.
			whole := v.agui("GET", "/v1/ag-ui/threads/t1/events", nil, "Last-Event-ID", "-1")
			var cursor string
			for cursor == "" {
				f, err := whole.next()
				if err != nil {
					t.Fatal(err)
				}
				if typeOf(f) == "TEXT_MESSAGE_CONTENT" {
					cursor = f.id
				}
			}
			whole.res.Body.Close()
			var hdr []string
			if tc.hdr != "" {
				hdr = []string{tc.hdr, cursor}
			}
			a := v.agui("GET", tc.path, nil, hdr...)
			a.v = nil // from a cursor, the stream goes on from frames the client has
			v.mustDo(204, "DELETE", "/v1/threads/t1", nil)
			frames, err := a.all()
			if err != io.EOF {
				t.Fatalf("ended with %v, want a clean end", err)
			}
			if n := len(frames); n == 0 || typeOf(frames[n-1]) != "RUN_ERROR" || frames[n-1].event["code"] != "thread_deleted" {
				var last string
				if n > 0 {
					last = frames[n-1].raw
				}
				t.Fatalf("%d frames, the last %s; want RUN_ERROR thread_deleted", n, last)
			}
		})
	}
}
