package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
)

// bearerClient sends every request with token.
type bearerClient struct{ token string }

func (b bearerClient) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A stream with a token whose rights depend on the thread (a signed
// user's token: the thread's owner; a worker's: the run's lease) gets its
// response head and ":ok" at once on a thread the node has not loaded, as
// any stream does: those rights are read from the store after the
// preamble. What they decide then ends the stream in-band: a thread the
// user may not see is not_found, as a JSON request's 404; a run the worker
// does not hold is forbidden.
func TestSSEPreambleBeforeRightsCheck(t *testing.T) {
	c := &clock{}
	opts := api.Options{SubscribeTimeout: time.Minute}
	opts.Tokens.Secret, opts.Tokens.Audience, opts.Tokens.Now = tkSecret, tkAudience, c.now
	alice := mint(t, nil, userClaims(c, "alice", map[string]any{"threads": []string{"cold"}}))
	bob := mint(t, nil, userClaims(c, "bob", map[string]any{"threads": []string{"bob/*"}}))
	worker := mint(t, nil, userClaims(c, "w", map[string]any{"role": "worker", "agents": []string{"ext"}}))

	for _, tc := range []struct {
		name, token, path string
		end               string // the code of the end frame; "" for a stream that goes on
	}{
		{"the owner", alice, "/v1/threads/cold/events", ""},
		{"another user", bob, "/v1/threads/cold/events", "not_found"},
		{"a worker that does not hold the run", worker, "/v1/runs/{rid}/events", "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, h, cursor, runID := coldRun(t, opts)
			path := strings.Replace(tc.path, "{rid}", runID, 1)
			h.hold()
			defer h.release()
			s := openWhileHeld(t, &http.Client{Transport: bearerClient{tc.token}}, v.url+path, cursor)
			h.release()
			f, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			if tc.end == "" {
				if f.Event != "connected" {
					t.Fatalf("after :ok: %+v, want connected", f)
				}
				return
			}
			var end struct {
				Reason string
				Error  struct{ Code string }
			}
			if f.Event != "end" || json.Unmarshal([]byte(f.Data), &end) != nil || end.Reason != "error" || end.Error.Code != tc.end {
				t.Fatalf("after :ok: %+v, want end with reason error, code %s", f, tc.end)
			}
		})
	}
}
