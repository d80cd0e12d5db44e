package natsstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
)

// TestChurn has three nodes commit, update runs, delete and create again a
// few threads at random, one of the nodes "dying" after each publish (it
// writes no rows, the others' repairers do). In the end every node reads
// what a model of the threads holds: at once for the threads and their
// logs, once repaired for the runs, the active runs and the listing.
func TestChurn(t *testing.T) {
	eachDeployment(t, func(t *testing.T, opts natsstore.Options) {
		opts.RepairDelay = 20 * time.Millisecond
		a, b := node(t, opts, "a"), node(t, opts, "b")
		opts.NoRepair = true
		c := node(t, opts, "c")
		natsstore.DieAfterPublish(c, true)
		nodes := []*natsstore.Store{a, b, c}

		type model struct {
			exists  bool
			version int64
			log     []*tether.Record
			runs    map[string]tether.RunStatus
			gone    []string // runs of deleted incarnations
		}
		const threads, ops = 4, 60
		models := make([]*model, threads)
		var wg sync.WaitGroup
		for th := range threads {
			id := fmt.Sprintf("t%d", th)
			m := &model{runs: map[string]tether.RunStatus{}}
			models[th] = m
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(th), 1))
				incarnation := 0
				for op := range ops {
					st := nodes[rng.IntN(len(nodes))]
					switch p := rng.IntN(20); {
					case !m.exists:
						incarnation++
						b := createBatch(t, id, rng.IntN(3))
						run := fmt.Sprintf("%s-i%d-r0", id, incarnation)
						b.Runs = []*store.RunRecord{newRun(run, id, "key-"+run, tether.RunPending)}
						res, err := st.Commit(ctx, b)
						if err != nil {
							t.Errorf("%s: create: %v", id, err)
							return
						}
						m.exists, m.version, m.log = true, res.Version, res.Records
						m.runs = map[string]tether.RunStatus{run: tether.RunPending}
					case p == 0:
						if err := st.DeleteThread(ctx, id); err != nil {
							t.Errorf("%s: delete: %v", id, err)
							return
						}
						for r := range m.runs {
							m.gone = append(m.gone, r)
						}
						*m = model{runs: map[string]tether.RunStatus{}, gone: m.gone}
					default:
						b := appendBatch(t, id, m.version, rng.IntN(3), fmt.Sprintf("%s-%d", id, op))
						statuses := []tether.RunStatus{tether.RunRunning, tether.RunWaiting, tether.RunDone, tether.RunPending}
						for r, status := range m.runs {
							if rng.IntN(3) == 0 && !status.Terminal() {
								next := statuses[rng.IntN(len(statuses))]
								b.Runs = append(b.Runs, newRun(r, id, "key-"+r, next))
								m.runs[r] = next
							}
						}
						if rng.IntN(4) == 0 {
							r := fmt.Sprintf("%s-i%d-r%d", id, incarnation, op)
							b.Runs = append(b.Runs, newRun(r, id, "key-"+r, tether.RunPending))
							m.runs[r] = tether.RunPending
						}
						res, err := st.Commit(ctx, b)
						if err != nil {
							t.Errorf("%s: append at %d: %v", id, m.version, err)
							return
						}
						m.version = res.Version
						m.log = append(m.log, res.Records...)
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}

		var wantActive, wantListed []string
		for th, m := range models {
			id := fmt.Sprintf("t%d", th)
			if !m.exists {
				continue
			}
			wantListed = append(wantListed, id)
			for r, status := range m.runs {
				if !status.Terminal() {
					wantActive = append(wantActive, r)
				}
			}
		}
		slices.Sort(wantActive)
		slices.Sort(wantListed)
		for i, st := range nodes[:2] {
			// At once: threads, logs, runs by key.
			for th, m := range models {
				id := fmt.Sprintf("t%d", th)
				tr, err := st.Thread(ctx, id)
				if !m.exists {
					if !errors.Is(err, store.ErrNotFound) {
						t.Fatalf("node %d: deleted thread %s: %v", i, id, err)
					}
					continue
				}
				if err != nil || tr.Version != m.version {
					t.Fatalf("node %d: thread %s: %+v, %v; want version %d", i, id, tr, err, m.version)
				}
				log := readAll(t, st, id)
				if len(log) != len(m.log) {
					t.Fatalf("node %d: %s: %d events, want %d", i, id, len(log), len(m.log))
				}
				for j := range log {
					if log[j].Offset != m.log[j].Offset || string(log[j].Data) != string(m.log[j].Data) {
						t.Fatalf("node %d: %s: event %d differs", i, id, j)
					}
				}
				for r, status := range m.runs {
					rr, err := st.RunByKey(ctx, id, "key-"+r)
					if err != nil || rr.Run.ID != r || rr.Run.Status != status {
						t.Fatalf("node %d: run of key %s: %+v, %v; want %s", i, r, rr, err, status)
					}
				}
			}
			// Once repaired: runs, active runs, the listing.
			eventually(t, fmt.Sprintf("node %d", i), func() error {
				for _, m := range models {
					for r, status := range m.runs {
						rr, err := st.Run(ctx, r)
						if err != nil || rr.Run.Status != status {
							return fmt.Errorf("run %s: %+v, %v; want %s", r, rr, err, status)
						}
					}
					for _, r := range m.gone {
						if _, ok := m.runs[r]; ok {
							continue
						}
						if _, err := st.Run(ctx, r); !errors.Is(err, store.ErrNotFound) {
							return fmt.Errorf("run %s of a deleted thread: %v", r, err)
						}
					}
				}
				active, err := st.ActiveRuns(ctx)
				if err != nil {
					return err
				}
				got := make([]string, len(active))
				for j, rr := range active {
					got[j] = rr.Run.ID
				}
				slices.Sort(got)
				if !slices.Equal(got, wantActive) {
					return fmt.Errorf("active runs %v, want %v", got, wantActive)
				}
				page, err := st.Threads(ctx, store.ThreadQuery{})
				if err != nil {
					return err
				}
				var listed []string
				for _, th := range page.Threads {
					listed = append(listed, th.ID)
				}
				slices.Sort(listed)
				if !slices.Equal(listed, wantListed) {
					return fmt.Errorf("listing %v, want %v", listed, wantListed)
				}
				return nil
			})
		}
	})
}
