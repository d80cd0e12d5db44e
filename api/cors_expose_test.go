package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams"
)

// A page of an origin in --cors-origins reads every header the answers it
// gets carry for it (docs/protocol.md §9, CORS): a header missing from
// Access-Control-Expose-Headers is invisible to its script. The AI SDK's
// …/messages sent Tether-Offset, the offset docs/ai-sdk.md tells a page
// the conversation is as of, and it was not exposed.
func TestCORSExposesTheAnswersHeaders(t *testing.T) {
	const origin = "https://app.example"
	v := newEnvStreams(t, testutil.OpenStore(t, ""), api.Options{CORSOrigins: []string{origin}}, engine.Options{}, &streams.Options{})
	o := []string{"Origin", origin}
	v.mustDo(201, "POST", "/v1/threads", `{"id":"t1"}`, o...)
	run := v.demoRun("t1", `{"tokens":2,"delay_ms":0}`)
	v.waitRun(run, "done")
	chat := `{"id":"c1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}],"metadata":{"demo":{"tokens":2,"delay_ms":0}}}`
	answers := []*resp{
		v.mustDo(201, "POST", "/v1/threads", `{}`, o...),
		v.mustDo(200, "GET", "/v1/threads/t1", nil, o...),
		v.mustDo(200, "POST", "/v1/ai-sdk/demo/chat", chat, o...),
		v.mustDo(200, "GET", "/v1/ai-sdk/demo/chat/c1/messages", nil, o...),
		v.mustDo(201, "PUT", "/v1/stream/s1", nil, "Origin", origin, "Content-Type", "text/plain"),
		v.mustDo(204, "POST", "/v1/stream/s1", "data", "Origin", origin, "Content-Type", "text/plain"),
		v.mustDo(200, "GET", "/v1/stream/s1?offset=-1", nil, o...),
		v.mustDo(404, "GET", "/v1/threads/nope", nil, o...),
	}
	// Headers for the browser or a proxy, not for the page's script, and
	// those CORS lets every script read.
	notForScripts := []string{"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary", "Date",
		"Content-Security-Policy", "X-Content-Type-Options", "Cross-Origin-Resource-Policy", "X-Accel-Buffering",
		"Content-Disposition", "Connection",
		"Cache-Control", "Content-Language", "Content-Length", "Content-Type", "Expires", "Last-Modified", "Pragma"}
	checked := 0
	for _, r := range answers {
		exposed := strings.Split(r.header.Get("Access-Control-Expose-Headers"), ", ")
		for name := range r.header {
			if slices.Contains(notForScripts, name) {
				continue
			}
			checked++
			if !slices.ContainsFunc(exposed, func(e string) bool { return http.CanonicalHeaderKey(e) == name }) {
				t.Errorf("an answer carries %s, which Access-Control-Expose-Headers (%q) does not expose", name, exposed)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d headers", checked)
	}
}
