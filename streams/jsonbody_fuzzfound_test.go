package streams_test

import (
	"testing"

	"github.com/tetherhq/tether/streams"
)

// A JSON stream takes only JSON. The JSON body was trimmed with
// bytes.TrimSpace, which also strips what JSON does not count as
// whitespace (form feed, vertical tab, U+0085, U+00A0), so "\f0" was
// accepted and stored as 0. Found by FuzzStreamAppend
// (api/durablestreams). JSON's whitespace is space, tab, CR and LF only
// (RFC 8259 §2).
func TestJSONAppendRefusesNonJSONWhitespace(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "j", ContentType: "application/json"})
	for _, body := range []string{"\f0", "0\v", "\u00a0{}", "\u0085[1]"} {
		_, err := e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(body)})
		wantCode(t, err, streams.CodeBadRequest)
	}
	// JSON's own whitespace is fine.
	if _, err := e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(" \t\r\n0 \n")}); err != nil {
		t.Fatal(err)
	}
}
