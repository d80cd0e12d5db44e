package api

import (
	"net/http"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/runs"
)

// singleParams refuses (bad_request) a request that gives one of the
// named query parameters, or the Last-Event-ID header, more than once.
// Which of two cursors or filters the server would take is not for the
// client to guess, and taking one while ignoring the other would answer a
// question it did not ask (a Durable Streams read refuses a repeated
// offset alike).
func singleParams(r *http.Request, names ...string) error {
	q := r.URL.Query()
	for _, name := range names {
		if len(q[name]) > 1 {
			return tether.Errorf(tether.CodeBadRequest, "%s is given more than once", name)
		}
	}
	if len(r.Header.Values("Last-Event-ID")) > 1 {
		return tether.Errorf(tether.CodeBadRequest, "Last-Event-ID is given more than once")
	}
	return nil
}

// checkTypes refuses (bad_request) a subscription's type filter that
// names what is no event type: a typo, or an empty name (?types=a,). The
// set of types is closed, so such a filter would deliver nothing, which
// looks like a thread with nothing in it rather than a mistake.
func checkTypes(types []string) error {
	for _, ty := range types {
		if !runs.IsEventType(ty) {
			return tether.Errorf(tether.CodeBadRequest, "types: %q is not an event type", clip.String(ty, 40))
		}
	}
	return nil
}
