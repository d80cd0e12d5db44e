package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// BenchmarkCreateRunWithState measures a run created with a front end's
// state of 256 KiB (AG-UI's RunAgentInput.state), as the AG-UI route does
// it: on a new thread the request is checked first (CheckRunRequest),
// then created. state-bytes/op is the memory allocated per run over the
// state's size: each encoding of the state's event adds about one.
func BenchmarkCreateRunWithState(b *testing.B) {
	items := make([]string, 256)
	for i := range items {
		items[i] = strings.Repeat("x", 1000)
	}
	state, _ := json.Marshal(map[string]any{"items": items})
	for _, fresh := range []bool{false, true} {
		b.Run(fmt.Sprintf("new_thread=%v", fresh), func(b *testing.B) {
			e := engine.New(testutil.OpenStore(b, ""), engine.Options{AcceptAgent: func(string) bool { return true }})
			ctx := context.Background()
			if err := e.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			for i := range b.N {
				if _, _, err := e.CreateThread(ctx, fmt.Sprintf("t%d", i), nil); err != nil {
					b.Fatal(err)
				}
			}
			req := engine.RunRequest{Agent: "a", State: state}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if fresh {
					if err := e.CheckRunRequest(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := e.CreateRun(ctx, fmt.Sprintf("t%d", i), req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(state)), "state-bytes/op")
		})
	}
}
