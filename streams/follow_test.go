package streams_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/streams"
)

// TestFollowerAtWholeAppends: a follower's batches end at whole appends,
// never between the pieces (ChunkBytes, 4 bytes here) a large append is
// stored in, also when it fell behind and reads the log a page (2
// records) at a time. Its batches ended where a page did: inside a
// character of a text stream ("€", 3 bytes), at an offset inside an
// append, which a long poll or an SSE response handed out.
func TestFollowerAtWholeAppends(t *testing.T) {
	for _, wait := range []bool{true, false} {
		e := newEnvHub(t, streams.Options{ChunkBytes: 4}, hub.Options{RingSize: 4, BufferEvents: 4, HistoryPage: 2})
		ctx := ctxT(t)
		e.create(streams.CreateRequest{Path: "s", ContentType: "text/plain"})
		f, err := e.svc.Follow(ctx, "s", streams.OffsetNow)
		if err != nil {
			t.Fatal(err)
		}
		ends := map[string]bool{}
		appends := []string{"0123", "€€€€", "xy", "€€€€€€€€", "c", "€€€€€€", "d"}
		for _, a := range appends {
			ends[e.append("s", "text/plain", a).Tail] = true
		}
		var got []string
		for len(strings.Join(got, "")) < len(strings.Join(appends, "")) {
			next := f.Next
			if !wait {
				next = f.TryNext
			}
			b, err := next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b == nil {
				<-f.Ready()
				continue
			}
			var data []byte
			for _, it := range b.Items {
				data = append(data, it...)
			}
			if !ends[b.Next] || !utf8.Valid(data) {
				t.Fatalf("wait %v: batch %d, %q, ends at %s, inside an append", wait, len(got), data, b.Next)
			}
			got = append(got, string(data))
		}
		f.Close()
		if strings.Join(got, "") != strings.Join(appends, "") {
			t.Fatalf("wait %v: followed %q, want %q", wait, got, appends)
		}
	}
}
