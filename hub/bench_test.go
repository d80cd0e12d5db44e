package hub

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	tether "github.com/tetherhq/tether"
)

// benchRecords returns n records with offsets after seq, sharing one JSON
// body (the hub never looks at it).
func benchRecords(seq uint64, n int) []*tether.Record {
	data := []byte(`{"offset":"0000000001_0000000000000000","type":"text.delta","ts":"2025-01-01T00:00:00Z","run_id":"run_1","message_id":"msg_1","delta":"hello"}`)
	recs := make([]*tether.Record, n)
	buf := []byte("0000000001_")
	for i := range recs {
		b := strconv.AppendUint(buf[:11:11], seq+uint64(i)+1, 10)
		o := make([]byte, 0, 27)
		o = append(o, b[:11]...)
		for range 27 - len(b) {
			o = append(o, '0')
		}
		o = append(o, b[11:]...)
		recs[i] = &tether.Record{Offset: tether.Offset(o), Type: tether.EventTextDelta, RunID: "run_1", MessageID: "msg_1", Data: data}
	}
	return recs
}

func noHistory(context.Context, string, tether.Offset, int, int) ([]*tether.Record, bool, error) {
	return nil, false, nil
}

// BenchmarkPublish publishes one record per op to a thread whose
// subscribers each drain in their own goroutine, and waits at the end until
// all have everything. records/s counts deliveries (records × subscribers).
func BenchmarkPublish(b *testing.B) {
	for _, subs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			// Buffers big enough that no subscriber is cut: this measures
			// the fan-out, not the cut.
			h := New(noHistory, Options{BufferEvents: 1 << 30, BufferBytes: 1 << 40})
			defer h.Close()
			first := benchRecords(0, 1)
			h.Publish("t", tether.OffsetStart, first)
			final := benchRecords(uint64(b.N), 1)[0].Offset

			var wg sync.WaitGroup
			for range subs {
				s := h.Subscribe("t", first[0].Offset)
				wg.Go(func() {
					defer s.Close()
					for {
						recs, err := s.Next(context.Background())
						if err != nil {
							b.Error(err)
							return
						}
						if recs[len(recs)-1].Offset == final {
							return
						}
					}
				})
			}

			const chunk = 1 << 16
			before := first[0].Offset
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += chunk {
				b.StopTimer()
				recs := benchRecords(uint64(i+1), min(chunk, b.N-i))
				b.StartTimer()
				for j := range recs {
					h.Publish("t", before, recs[j:j+1])
					before = recs[j].Offset
				}
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(subs)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkSubscribeFromRing resumes from the middle of a full ring (512
// records to return) and from its tail.
func BenchmarkSubscribeFromRing(b *testing.B) {
	h := New(noHistory, Options{})
	defer h.Close()
	recs := benchRecords(0, 1024)
	h.Publish("t", tether.OffsetStart, recs)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		after tether.Offset
		want  int
	}{
		{"middle", recs[511].Offset, 512},
		{"tail", recs[1023].Offset, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := h.Subscribe("t", tc.after)
				got, err := s.TryNext(ctx)
				if err != nil || len(got) != tc.want {
					b.Fatalf("TryNext = %d records, %v; want %d", len(got), err, tc.want)
				}
				s.Close()
			}
		})
	}
}
