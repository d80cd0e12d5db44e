package engine_test

import (
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestNewThreadStateCheckMatchesCommit: CheckRunRequest refuses a state
// for a new thread exactly when the run's own append would, around the
// largest event, also for a state the encoding makes longer (<, > and &
// escaped, U+2028): the check encodes only the states that may not fit
// (the run's encoding is then the one that counts), and may not say yes
// to one the run is refused for, nor no to one it takes.
func TestNewThreadStateCheckMatchesCommit(t *testing.T) {
	const limit = 4096
	flips := map[bool]int{}
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{MaxEventBytes: limit, AcceptAgent: func(string) bool { return true }})
	for _, c := range []struct {
		fill  string
		ratio float64 // encoded bytes per byte of the state
	}{{"x", 1}, {"<", 6}, {"\u2028", 2}, {"x<&", 13.0 / 3}} {
		// Around where the encoding crosses the limit (about 110 bytes
		// of other fields), and below where the check skips encoding.
		at := int(float64(limit-110) / c.ratio)
		sizes := []int{at - 300, at - 260}
		for n := at - 30; n <= at+30; n++ {
			sizes = append(sizes, n)
		}
		for _, n := range sizes {
			s := strings.ToValidUTF8(strings.Repeat(c.fill, n/len(c.fill)+1)[:n], "")
			state := []byte(`"` + s + `"`)
			req := engine.RunRequest{Agent: "a", State: state}
			checked := e.CheckRunRequest(ctxT(t), req)
			tid := fmt.Sprintf("t-%x-%d", c.fill, n)
			mustThread(t, e, tid)
			_, created := e.CreateRun(ctxT(t), tid, req)
			if (checked == nil) != (created == nil) {
				t.Fatalf("fill %q, state of %d bytes: checked %v, created %v", c.fill, len(state), checked, created)
			}
			if checked != nil && tether.CodeOf(checked) != tether.CodeTooLarge {
				t.Fatalf("fill %q, state of %d bytes: %v", c.fill, len(state), checked)
			}
			flips[checked == nil]++
		}
	}
	if flips[true] == 0 || flips[false] == 0 {
		t.Fatalf("no state on one side of the limit: %v", flips)
	}
}
