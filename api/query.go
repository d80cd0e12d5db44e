package api

import (
	"net/http"

	tether "github.com/tetherhq/tether"
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
