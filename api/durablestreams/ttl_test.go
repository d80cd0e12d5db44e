package durablestreams_test

import (
	"testing"

	"github.com/tetherhq/tether/api/durablestreams"
)

// A Stream-TTL longer than a time.Duration holds (over about 292 years, as
// a client asking for "forever" may send) keeps the stream as long as any
// other: it was taken for a negative window, so the stream created with
// 201 answered 404 at once and its data was deleted.
func TestHTTPLongTTLKeepsTheStream(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	for _, ttl := range []string{"9300000000", "9223372036854775807"} {
		path := "ttl/" + ttl
		resp, body := s.do("PUT", path, "kept", "Content-Type", "text/plain", "Stream-TTL", ttl)
		s.want(resp, body, 201)
		resp, body = s.do("GET", path, "")
		s.want(resp, body, 200)
		if body != "kept" {
			t.Fatalf("TTL %s: read %q", ttl, body)
		}
		resp, body = s.do("POST", path, " more", "Content-Type", "text/plain")
		s.want(resp, body, 204)
		resp, body = s.do("HEAD", path, "")
		s.want(resp, body, 200)
		if got := resp.Header.Get("Stream-TTL"); got != ttl {
			t.Fatalf("HEAD: Stream-TTL %q, want %q", got, ttl)
		}
		resp, body = s.do("PUT", path, "", "Content-Type", "text/plain", "Stream-TTL", ttl)
		s.want(resp, body, 200)
	}
}
