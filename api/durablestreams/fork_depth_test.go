package durablestreams_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// TestForkDepth: every fork that is created can be read, also once the
// server loads it again from the store (after a restart, or out of its
// cache, as here where it keeps two streams): forks of forks were created
// at any depth, but one more than 65 deep answered 503 from then on (its
// chain of sources was refused as too long when loaded), for good. A fork
// deeper than the limit is refused when it is created, with a bad request.
func TestForkDepth(t *testing.T) {
	s := newServerWith(t, streams.Options{MaxStreams: 2}, wake.Options{}, durablestreams.Options{})
	resp, body := s.do("PUT", "c0", "x", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	created := 0
	for i := 1; i <= 70; i++ {
		resp, body = s.do("PUT", fmt.Sprintf("c%d", i), "", "Stream-Forked-From", fmt.Sprintf("/v1/stream/c%d", i-1))
		if resp.StatusCode != 201 {
			if resp.StatusCode != 400 || !strings.Contains(body, `"bad_request"`) {
				t.Fatalf("fork %d: %d %s", i, resp.StatusCode, body)
			}
			break
		}
		created = i
	}
	if created < 64 {
		t.Fatalf("only %d forks of forks could be created", created)
	}
	for i := 0; i <= created; i++ {
		resp, body = s.do("GET", fmt.Sprintf("c%d", i), "")
		if resp.StatusCode != 200 || body != "x" {
			t.Fatalf("fork %d of %d created: %d %s", i, created, resp.StatusCode, body)
		}
	}
}
