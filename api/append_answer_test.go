package api

import (
	"encoding/json"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

// TestAppendAnswer checks that the append's answer, written without
// encoding/json, is byte for byte what json.Marshal wrote before.
func TestAppendAnswer(t *testing.T) {
	at := tether.At(time.Date(2026, 12, 1, 18, 30, 5, 123456789, time.FixedZone("x", 3600)))
	for _, res := range []*engine.AppendResult{
		{NextOffset: "0000000001-0000000000000042", LeaseExpiresAt: at},
		{NextOffset: "0000000001-0000000000000042", LeaseExpiresAt: at, CancelRequested: true},
		{NextOffset: tether.OffsetStart},
		{NextOffset: "", LeaseExpiresAt: at},
		{NextOffset: `odd"<&>\` + "\u2028é", LeaseExpiresAt: at, Duplicate: true, Producer: &engine.Producer{ID: "p"}},
	} {
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		if got := appendAnswer(nil, res); string(got) != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", res, got, want)
		}
	}
}

// BenchmarkAppendAnswer is the encoding of an append's answer.
func BenchmarkAppendAnswer(b *testing.B) {
	res := &engine.AppendResult{NextOffset: "0000000001-0000000000000042", LeaseExpiresAt: tether.Now()}
	b.Run("appendAnswer", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 128)
		for b.Loop() {
			buf = appendAnswer(buf[:0], res)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
