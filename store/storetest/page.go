package storetest

import (
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// sizedBatch is a batch of events whose Data are about the given sizes.
func sizedBatch(tb testing.TB, threadID string, version int64, sizes ...int) *store.Batch {
	tb.Helper()
	b := &store.Batch{ThreadID: threadID, Version: version}
	for i, n := range sizes {
		data, _ := json.Marshal(map[string]any{"i": i, "pad": strings.Repeat("p", n)})
		ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now(), RunID: "run-" + threadID, Name: "storetest", Data: data}
		enc, err := ev.Encode()
		if err != nil {
			tb.Fatal(err)
		}
		b.Events, b.Encoded = append(b.Events, ev), append(b.Encoded, enc)
	}
	return b
}

func pageBytes(recs []*tether.Record) int {
	n := 0
	for _, r := range recs {
		n += r.Size()
	}
	return n
}

// testReadPage: ReadPage pages through a log of small and large records,
// several to a batch, by count and by bytes. Each page is as long as its
// limits allow (a page over maxBytes holds one record, which comes whole),
// the pages together are the log, each record once and in order, and more
// is false only at the end of the log, so a page cut by bytes is never
// taken for the end.
func testReadPage(t *testing.T, s *suite) {
	st := s.fresh(t)
	commit(t, st, createBatch(t, "t", 0))
	var all []*tether.Record
	for _, sizes := range [][]int{
		{10, 20_000, 10},
		{5_000, 5_000, 5_000, 5_000},
		{40_000},
		{1, 2, 3, 4, 5, 6, 7, 8, 9},
		{30_000, 10, 30_000},
	} {
		all = append(all, commit(t, st, sizedBatch(t, "t", int64(len(all)), sizes...)).Records...)
	}
	sameRecords(t, "whole log", readAll(t, st, "t"), all)

	for _, c := range []struct{ limit, maxBytes int }{
		{100, 0}, {100, 1}, {100, 6_000}, {100, 12_000}, {100, 45_000}, {100, 1 << 30},
		{3, 0}, {3, 6_000}, {len(all), 0}, {len(all) + 1, 0},
	} {
		var got []*tether.Record
		after := tether.OffsetStart
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("limit %d, maxBytes %d: paging does not end", c.limit, c.maxBytes)
			}
			recs, more, err := st.ReadPage(ctx, "t", after, c.limit, c.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			rest := all[len(got):]
			// The longest page the limits allow: at least one record, then
			// as many as fit in maxBytes.
			want := min(c.limit, len(rest))
			if c.maxBytes > 0 {
				for n := 2; n <= want; n++ {
					if pageBytes(rest[:n]) > c.maxBytes {
						want = n - 1
						break
					}
				}
			}
			if len(recs) != want {
				t.Fatalf("limit %d, maxBytes %d: page %d of %d records (%d bytes), want %d",
					c.limit, c.maxBytes, pages, len(recs), pageBytes(recs), want)
			}
			sameRecords(t, "page", recs, rest[:want])
			got = append(got, recs...)
			if !more {
				if len(got) != len(all) {
					t.Fatalf("limit %d, maxBytes %d: more is false after %d of %d records", c.limit, c.maxBytes, len(got), len(all))
				}
				break
			}
			if len(recs) < c.limit && c.maxBytes <= 0 {
				t.Fatalf("limit %d: a page of %d records, short of the limit, says more", c.limit, len(recs))
			}
			if len(recs) > 0 {
				after = recs[len(recs)-1].Offset
			}
		}
		sameRecords(t, "paged log", got, all)
	}

	// From a cursor inside a batch, over the budget at once.
	recs, more, err := st.ReadPage(ctx, "t", all[1].Offset, 100, 1)
	if err != nil || !more {
		t.Fatalf("read after a record inside a batch: more %v, %v", more, err)
	}
	sameRecords(t, "page after a record inside a batch", recs, all[2:3])

	// A limit of zero checks the thread and cursor and returns nothing.
	if recs, more, err := st.ReadPage(ctx, "t", all[3].Offset, 0, 0); err != nil || len(recs) != 0 || !more {
		t.Fatalf("limit 0: %d records, more %v, %v", len(recs), more, err)
	}
	_, _, err = st.ReadPage(ctx, "nope", tether.OffsetStart, 10, 100)
	wantErr(t, "ReadPage of an unknown thread", err, store.ErrNotFound)
	commit(t, st, createBatch(t, "u", 2))
	_, _, err = st.ReadPage(ctx, "t", readAll(t, st, "u")[0].Offset, 10, 100)
	wantErr(t, "ReadPage after an offset of another thread", err, store.ErrOffsetNotFound)
}
