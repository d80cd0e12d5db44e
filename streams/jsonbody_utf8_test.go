package streams_test

import (
	"testing"

	"github.com/tetherhq/tether/streams"
)

// A JSON stream takes only JSON, which is UTF-8 (RFC 8259 §8.1). A body
// with bytes that are not UTF-8 inside a string ("\xff") passed the JSON
// check, which does not look at encodings, was stored, and was read back
// as it came: a JSON array no strict parser takes, and one that decoders
// that replace bad bytes read otherwise than the stored bytes.
func TestJSONAppendRefusesInvalidUTF8(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	for _, body := range []string{"\"\xff\"", "[\"ok\",\"\xc3\"]", "{\"k\xfe\":1}"} {
		_, err := e.svc.Create(ctx, streams.CreateRequest{Path: "p", ContentType: "application/json", Body: []byte(body)})
		wantCode(t, err, streams.CodeBadRequest)
	}
	e.create(streams.CreateRequest{Path: "j", ContentType: "application/json"})
	for _, body := range []string{"\"\xff\"", "[\"ok\",\"\xc3\"]", "{\"k\xfe\":1}"} {
		_, err := e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(body)})
		wantCode(t, err, streams.CodeBadRequest)
	}
	// UTF-8 text, escapes included, is fine.
	if _, err := e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte("[\"é😀\",\"\\u00e9\"]")}); err != nil {
		t.Fatal(err)
	}
}
