package hub

import (
	"testing"

	tether "github.com/tetherhq/tether"
)

func TestRingCoverage(t *testing.T) {
	var r ring
	if _, ok := r.find(tether.OffsetStart); ok {
		t.Fatal("an uninitialised ring covers OffsetStart")
	}
	r.reset(tether.OffsetStart)
	var recs []*tether.Record
	for i := 1; i <= 10; i++ {
		rec := newRecord(tether.FormatOffset(1, uint64(10*i)), i)
		recs = append(recs, rec)
		r.push(rec, 4, 1<<20)
	}
	if r.n != 4 || r.base != recs[5].Offset || r.last != recs[9].Offset {
		t.Fatalf("ring holds %d records after %s up to %s, want 4 after %s up to %s", r.n, r.base, r.last, recs[5].Offset, recs[9].Offset)
	}
	for i := 0; i < r.n; i++ {
		if r.at(i) != recs[6+i] {
			t.Fatalf("record %d is %s, want %s", i, r.at(i).Offset, recs[6+i].Offset)
		}
	}
	for _, tc := range []struct {
		after tether.Offset
		next  int // index in the ring of the first record after, -1: not covered
	}{
		{tether.OffsetStart, -1},
		{recs[0].Offset, -1},
		{recs[4].Offset, -1},
		{recs[5].Offset, 0}, // base
		{recs[6].Offset, 1},
		{recs[8].Offset, 3},
		{recs[9].Offset, 4},                     // tail: nothing to queue
		{tether.FormatOffset(1, 75), -1},        // between two records: not an event of the thread
		{tether.FormatOffset(1, 1000), -1},      // after the tail
		{tether.FormatOffset(2, 10), -1},        // another epoch
		{tether.Offset("garbage"), -1},          // not an offset
		{tether.FormatOffset(0, 99999), -1},     // before everything
		{tether.OffsetNow, -1},                  // not supported
		{tether.Offset(recs[7].Offset[:5]), -1}, // a prefix of a held offset
	} {
		i, ok := r.find(tc.after)
		if ok != (tc.next >= 0) || ok && i != tc.next {
			t.Errorf("find(%s) = %d, %v; want %d", tc.after, i, ok, tc.next)
		}
	}

	r.reset(recs[9].Offset)
	if r.n != 0 || r.bytes != 0 {
		t.Fatalf("reset ring holds %d records, %d bytes", r.n, r.bytes)
	}
	if i, ok := r.find(recs[9].Offset); !ok || i != 0 {
		t.Fatalf("a reset ring does not cover its base")
	}
	if _, ok := r.find(recs[8].Offset); ok {
		t.Fatalf("a reset ring covers a record it dropped")
	}
}

func TestRingBytes(t *testing.T) {
	var r ring
	r.reset(tether.OffsetStart)
	small := newRecord(tether.FormatOffset(1, 1), 1)
	limit := 3 * small.Size()
	for i := 1; i <= 5; i++ {
		r.push(newRecord(tether.FormatOffset(1, uint64(i)), i), 100, limit)
	}
	if r.n != 3 || r.bytes > limit {
		t.Fatalf("ring holds %d records, %d bytes; want 3, at most %d", r.n, r.bytes, limit)
	}
	// A record larger than the ring leaves it empty but still contiguous.
	big := newRecord(tether.FormatOffset(1, 6), 6)
	big.Data = make([]byte, limit)
	r.push(big, 100, limit)
	if r.n != 0 || r.bytes != 0 || r.base != big.Offset {
		t.Fatalf("after a huge record the ring holds %d records, %d bytes, base %s", r.n, r.bytes, r.base)
	}
	if i, ok := r.find(big.Offset); !ok || i != 0 {
		t.Fatal("the ring does not cover its last offset")
	}
}
