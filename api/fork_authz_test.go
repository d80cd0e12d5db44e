package api_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// TestForkNeedsTheSource: a fork is a read of its source; a user's token
// may fork only a stream it may read, or it would read any stream (and any
// thread's log) by forking it under a path of its own. A source it may not
// see is not found, as when it is read.
func TestForkNeedsTheSource(t *testing.T) {
	c := &clock{}
	v := newTokenEnv(t, c, api.Options{})
	f := v.tokenFixture(c)
	b := append(bearer(f.bob), "Content-Type", "application/json")
	for _, src := range []string{"/v1/stream/alice/s1", "/v1/stream/threads/tA", "alice/s1"} {
		r := v.do("PUT", "/v1/stream/bob/copy", "", append(b, "Stream-Forked-From", src)...)
		if r.status == 201 || r.status == 200 {
			got := v.do("GET", "/v1/stream/bob/copy?offset=-1", nil, bearer(f.bob)...)
			t.Fatalf("bob forked %s: %d; his fork reads %d %s", src, r.status, got.status, got.body)
		}
		if r.status != 404 || r.code() != "not_found" {
			t.Errorf("bob forks %s: %d %s, want 404 not_found", src, r.status, r.body)
		}
		if strings.Contains(string(r.body), aliceSecret) {
			t.Errorf("bob forks %s: the answer holds alice's data: %s", src, r.body)
		}
	}
	// Alice forks her own stream.
	v.mustDo(201, "PUT", "/v1/stream/alice/copy", "", append(bearer(f.alice), "Content-Type", "application/json", "Stream-Forked-From", "/v1/stream/alice/s1")...)
}
