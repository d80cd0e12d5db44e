package api_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// fullDiskStore fails every commit while full is set, as SQLite does on
// a full disk.
type fullDiskStore struct {
	store.Store
	full atomic.Bool
}

func (s *fullDiskStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if s.full.Load() {
		return nil, errors.New("sqlite: database or disk is full")
	}
	return s.Store.Commit(ctx, b)
}

// metric scrapes /metrics and returns the value of the series named
// (with its labels, if it has any).
func (v *env) metric(series string) float64 {
	v.t.Helper()
	r := v.mustDo(200, "GET", "/metrics", nil)
	for _, l := range strings.Split(string(r.body), "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				v.t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	v.t.Fatalf("/metrics has no %s", series)
	return 0
}

// An append the store fails to commit is not an accepted append:
// tether_appends_total counts what was committed, and the failure is
// counted once in tether_commit_errors_total.
func TestAppendsCountOnlyCommits(t *testing.T) {
	st := &fullDiskStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	v.thread("t1")
	run, lease := v.extRun("t1")
	appends, commitErrors := v.metric("tether_appends_total"), v.metric("tether_commit_errors_total")

	st.full.Store(true)
	if r := v.do("POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"x"}]`, lease...); r.status < 500 {
		t.Fatalf("append on a full disk: %d %s, want 5xx", r.status, r.body)
	}
	st.full.Store(false)
	if got := v.metric("tether_commit_errors_total"); got != commitErrors+1 {
		t.Fatalf("tether_commit_errors_total %v, want %v", got, commitErrors+1)
	}
	if got := v.metric("tether_appends_total"); got != appends {
		t.Fatalf("tether_appends_total %v after an append the store refused, want %v (unchanged)", got, appends)
	}
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"x"}]`, lease...)
	if got := v.metric("tether_appends_total"); got != appends+1 {
		t.Fatalf("tether_appends_total %v after a committed append, want %v", got, appends+1)
	}
}

// A run the sweeper cannot end while the disk is full (it tries again at
// every sweep) is counted in tether_runs_aborted_total, and logged, once:
// when its end is committed. Before, each failed attempt counted it.
func TestRunAbortedCountedOnce(t *testing.T) {
	clk := testutil.NewClock()
	st := &fullDiskStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{Now: clk.Now, LeaseTTL: 5 * time.Second, SweepInterval: 5 * time.Millisecond})
	v.thread("t1")
	run, _ := v.extRun("t1")
	commitErrors := v.metric("tether_commit_errors_total")

	st.full.Store(true)
	clk.Advance(time.Minute)
	testutil.Eventually(t, 20*time.Second, "the sweeper to try and fail three times", func() bool {
		return v.metric("tether_commit_errors_total") >= commitErrors+3
	})
	if got := v.metric("tether_runs_aborted_total"); got != 0 {
		t.Fatalf("tether_runs_aborted_total %v while no abort could be committed, want 0", got)
	}
	st.full.Store(false)
	v.waitRun(run, tether.RunAborted)
	if got := v.metric("tether_runs_aborted_total"); got != 1 {
		t.Fatalf("tether_runs_aborted_total %v after one run was aborted, want 1", got)
	}
}
