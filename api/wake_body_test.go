package api_test

import (
	"net/http"
	"testing"
	"time"
)

// TestWakeActionWithBadTokenHoldsNoBody: a webhook callback, ack or
// release needs no API key, only the wake's token; one whose token is not
// a wake's is refused before its body is read, so that a client without
// any token cannot hold the server's budget of request bodies in flight
// (and with it every write) by announcing large bodies it never sends.
func TestWakeActionWithBadTokenHoldsNoBody(t *testing.T) {
	v := newStreamsEnv(t)
	v.mustDo(201, "PUT", "/v1/stream/__ds/subscriptions/s1", `{"type":"pull-wake","pattern":"x/**","wake_stream":"wakes"}`,
		"Authorization", "Bearer "+clientToken, "Content-Type", "application/json")
	for _, action := range []string{"callback", "ack", "release", "callback"} {
		// Not one byte of the body sent.
		res, err := http.ReadResponse(stalledBody(t, v.url, "/v1/stream/__ds/subscriptions/s1/"+action, "not-a-wake-token", "", 10*time.Second), nil)
		if err != nil {
			t.Fatalf("%s with a bad token and a body never sent: no answer: %v", action, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s with a bad token: status %d, want 401", action, res.StatusCode)
		}
	}
	// Writes go on meanwhile.
	v.mustDo(201, "PUT", "/v1/stream/s/1", `{"a":1}`, "Authorization", "Bearer "+clientToken, "Content-Type", "application/json")
}
