package streams_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/streams"
)

// A JSON stream's messages nest at most 256 levels, as every value Tether
// keeps as it came: a deeper one is read back by clients whose decoder
// stops near 1,000 levels (Python's json), less their stack. Before, an
// append of 2,000 levels was stored (TestJSONAppendRefusesDeepJSON failed).
func TestJSONAppendRefusesDeepJSON(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	deep := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
	_, err := e.svc.Create(ctx, streams.CreateRequest{Path: "p", ContentType: "application/json", Body: []byte(deep)})
	wantCode(t, err, streams.CodeBadRequest)
	e.create(streams.CreateRequest{Path: "j", ContentType: "application/json"})
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(`{"a":` + deep + `}`)})
	wantCode(t, err, streams.CodeBadRequest)
	ok := strings.Repeat("[", 256) + strings.Repeat("]", 256)
	if _, err := e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(ok)}); err != nil {
		t.Fatal(err)
	}
	// Binary content is opaque.
	e.create(streams.CreateRequest{Path: "b", ContentType: "application/octet-stream"})
	if _, err := e.svc.Append(ctx, streams.AppendRequest{Path: "b", ContentType: "application/octet-stream", Body: []byte(deep)}); err != nil {
		t.Fatal(err)
	}
}
