package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
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
	host := strings.TrimPrefix(v.url, "http://")
	for _, action := range []string{"callback", "ack", "release", "callback"} {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// 4 MiB announced (the default --max-body), not one byte sent.
		fmt.Fprintf(c, "POST /v1/stream/__ds/subscriptions/s1/%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer not-a-wake-token\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", action, host, 4<<20)
		// A deadline only so that a failing test ends.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
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
