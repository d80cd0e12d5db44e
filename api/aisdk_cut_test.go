package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// TestAISDKSlowConsumerIsAborted: a UI message stream whose client falls
// so far behind that the server cuts it mid-answer is aborted, not
// closed cleanly: the AI SDK takes a clean end for the answer's end and
// would keep the partial message as the whole, where an abort is an
// error the client resumes from.
func TestAISDKSlowConsumerIsAborted(t *testing.T) {
	eopts := engine.Options{}
	eopts.Hub.BufferBytes = 256 << 10
	v := newEnvEngine(t, api.Options{}, eopts)
	v.thread("t1")
	run, lease := v.extRun("t1")
	req, _ := http.NewRequest("GET", v.url+"/v1/ai-sdk/ext/chat/t1/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	// Not read: the socket's buffers fill, then the subscription's in the
	// hub, which cuts it.
	v.stream(run, lease, func() bool { return v.e.Hub().Stats().Subscribers == 0 })
	defer v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.finished","status":"done"}]`, lease...)
	b, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("the stream was closed cleanly mid-answer after %d bytes (finish sent: %v), not aborted", len(b), strings.Contains(string(b), `"type":"finish"`))
	}
}
