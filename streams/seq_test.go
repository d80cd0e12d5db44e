package streams_test

import (
	"testing"

	"github.com/tetherhq/tether/streams"
)

// TestStreamSeqMustBeUTF8: the last Stream-Seq accepted is kept in the
// stream's metadata, which is JSON: one that was not UTF-8 was kept with
// its invalid bytes replaced (U+FFFD), so after a restart (or on another
// node) a Stream-Seq that sorts before it as bytes was accepted. A
// Stream-Seq must be UTF-8, in which byte order and the order of what is
// kept agree: another is a bad request, and nothing is written.
func TestStreamSeqMustBeUTF8(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "s", ContentType: "text/plain"})
	app := func(seq string) error {
		_, err := e.svc.Append(ctx, streams.AppendRequest{Path: "s", ContentType: "text/plain", Body: []byte("x"), Seq: seq})
		return err
	}
	first := app("\xff")
	e.reopen()
	second := app("\xf0")
	if first == nil && second == nil {
		t.Fatal(`Stream-Seq "\xf0" was accepted after "\xff"`)
	}
	wantCode(t, first, streams.CodeBadRequest)
	wantCode(t, second, streams.CodeBadRequest)
	if text, _ := e.text("s", "-1"); text != "" {
		t.Fatalf("the stream holds %q", text)
	}
	// UTF-8 beyond ASCII keeps its order across a restart.
	if err := app("é"); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	wantCode(t, app("z"), streams.CodeConflict)
	if err := app("ü"); err != nil {
		t.Fatal(err)
	}
}
