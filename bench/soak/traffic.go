package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"
)

// traffic is the load of one soak: it runs across rounds, riding out
// every kill by retrying until the server answers.
type traffic struct {
	w        *world
	url      string
	opts     *options
	draining atomic.Bool // no new runs: finish those under way
}

// createRun creates a run with an Idempotency-Key, retrying the same key
// until an answer says what happened, as a client must across a crash.
func (t *traffic) createRun(ctx context.Context, thread, kind, key string, body []byte, onUnknownAgent func()) (string, bool) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t.w.stats.createRetries.Add(1)
			if !pause(ctx, 50*time.Millisecond) {
				return "", false
			}
		}
		a := call(ctx, "POST", t.url+"/v1/threads/"+thread+"/runs", body, "Idempotency-Key", key)
		switch {
		case a.retryable():
			continue
		case a.status == 201 || a.status == 200:
			var r struct{ ID string }
			if err := json.Unmarshal(a.body, &r); err != nil || r.ID == "" {
				t.w.violation("run create on %s answered %d %q", thread, a.status, a.body)
				return "", false
			}
			t.w.addRun(&runInfo{id: r.ID, thread: thread, kind: kind, created: time.Now()})
			t.w.fire(faultCreate)
			return r.ID, true
		case a.status == 400 && onUnknownAgent != nil:
			onUnknownAgent() // a claim makes the agent known again
		case a.status == 409:
			// run_active: the thread's previous run has not ended yet.
		default:
			t.w.violation("run create on %s (key %s) answered %d %s", thread, key, a.status, a.body)
			return "", false
		}
	}
}

// demo creates in-process demo runs on one thread, one after another,
// each followed by an SSE client of the run.
func (t *traffic) demo(ctx context.Context, i int, rng *rand.Rand) {
	thread := fmt.Sprintf("soak-d%d", i)
	for n := 0; ctx.Err() == nil && !t.draining.Load(); n++ {
		meta := fmt.Sprintf(`{"demo":{"tokens":%d,"delay_ms":%d,"reasoning":%v}}`, 10+rng.IntN(120), 1+rng.IntN(8), rng.IntN(2) == 0)
		body := []byte(`{"agent":"demo","multitask":"enqueue","input":{"messages":[{"role":"user","content":"soak ` + strconv.Itoa(n) + `"}]},"metadata":` + meta + `}`)
		rid, ok := t.createRun(ctx, thread, kindDemo, fmt.Sprintf("%s-%d", thread, n), body, nil)
		if !ok {
			return
		}
		if t.opts.followers > 0 {
			go t.w.follow(ctx, t.url, "/v1/runs/"+rid+"/events", thread, rid, rng.Uint64())
		}
		t.waitEnded(ctx, rid)
	}
}

// waitEnded polls a run until it is terminal.
func (t *traffic) waitEnded(ctx context.Context, rid string) {
	for pause(ctx, 100*time.Millisecond) {
		a := call(ctx, "GET", t.url+"/v1/runs/"+rid, nil)
		if a.status != 200 {
			continue
		}
		var s struct{ Run struct{ Status string } }
		if json.Unmarshal(a.body, &s) == nil {
			switch s.Run.Status {
			case "done", "error", "cancelled", "aborted":
				return
			}
		}
	}
}

// worker is an external worker with its own agent and thread: it creates
// a run, claims it, and appends it in batches with producer headers,
// retrying each batch with the same sequence number until it is answered,
// so that a batch sent just before a kill is never appended twice.
func (t *traffic) worker(ctx context.Context, i int, rng *rand.Rand) {
	thread := fmt.Sprintf("soak-x%d", i)
	agent := fmt.Sprintf("soakext%d", i)
	id := fmt.Sprintf("soak-worker-%d", i)
	claim := func(wait int) answer {
		return call(ctx, "POST", t.url+"/v1/workers/claim", []byte(fmt.Sprintf(`{"worker_id":%q,"agents":[%q],"wait_ms":%d}`, id, agent, wait)))
	}
	for n := 0; ctx.Err() == nil; n++ {
		// Runs left by an earlier pass (created, answer lost) come first.
		a := claim(0)
		if a.status == 200 {
			t.work(ctx, a.body, id, rng)
			continue
		}
		if t.draining.Load() {
			return
		}
		body := []byte(`{"agent":"` + agent + `","input":{"messages":[{"role":"user","content":"soak ` + strconv.Itoa(n) + `"}]}}`)
		if _, ok := t.createRun(ctx, thread, kindExt, fmt.Sprintf("%s-%d", thread, n), body, func() { claim(0) }); !ok {
			return
		}
	}
}

// work runs one claimed run to its end, or abandons it on purpose (a
// worker that dies): then the server must end it worker_lost.
func (t *traffic) work(ctx context.Context, claimBody []byte, workerID string, rng *rand.Rand) {
	var c struct {
		Run struct {
			ID       string
			ThreadID string `json:"thread_id"`
		}
		Lease struct {
			Token     string
			ExpiresAt time.Time `json:"expires_at"`
		}
	}
	if err := json.Unmarshal(claimBody, &c); err != nil {
		t.w.violation("claim answered %q", claimBody)
		return
	}
	ri := t.w.run(c.Run.ID)
	if ri == nil {
		// Created by an answer this soak never got: known from now on.
		ri = &runInfo{id: c.Run.ID, thread: c.Run.ThreadID, kind: kindExt, created: time.Now()}
		t.w.addRun(ri)
		ri = t.w.run(c.Run.ID)
	}
	t.w.setExpiry(ri, c.Lease.ExpiresAt)
	msg := "a-" + c.Run.ID
	var batches [][]map[string]any
	batches = append(batches, []map[string]any{{"type": "message.started", "message_id": msg, "role": "assistant"}})
	nb := 2 + rng.IntN(12)
	for b := 0; b < nb; b++ {
		var evs []map[string]any
		for e := 0; e < 1+rng.IntN(5); e++ {
			evs = append(evs, map[string]any{"type": "text.delta", "message_id": msg, "delta": fmt.Sprintf("%s/%d.%d ", c.Run.ID, b, e)})
		}
		batches = append(batches, evs)
	}
	batches = append(batches, []map[string]any{{"type": "message.finished", "message_id": msg, "status": "done"}, {"type": "run.finished", "status": "done"}})
	abandonAt := -1
	if rng.IntN(12) == 0 {
		abandonAt = rng.IntN(len(batches))
	}
	for seq, evs := range batches {
		if seq == abandonAt {
			t.w.abandon(ri)
			return
		}
		if !t.appendBatch(ctx, ri, c.Lease.Token, workerID, seq, evs) {
			return
		}
		if !pause(ctx, time.Duration(10+rng.IntN(60))*time.Millisecond) {
			return
		}
	}
}

// appendBatch sends one batch until it is answered. It reports whether
// the run goes on.
func (t *traffic) appendBatch(ctx context.Context, ri *runInfo, lease, producer string, seq int, evs []map[string]any) bool {
	body, _ := json.Marshal(evs)
	keys := make([]string, len(evs))
	for i, e := range evs {
		d, _ := e["delta"].(string)
		m, _ := e["message_id"].(string)
		keys[i] = keyOf(e["type"].(string), ri.id, m, d)
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t.w.stats.appendRetries.Add(1)
			if !pause(ctx, 50*time.Millisecond) {
				return false
			}
		}
		a := call(ctx, "POST", t.url+"/v1/runs/"+ri.id+"/events", body, "Tether-Lease", lease,
			"Producer-Id", producer, "Producer-Epoch", "0", "Producer-Seq", strconv.Itoa(seq))
		switch {
		case a.retryable():
			continue
		case a.status == 200:
			var r struct {
				Next   string    `json:"next_offset"`
				Expiry time.Time `json:"lease_expires_at"`
			}
			if err := json.Unmarshal(a.body, &r); err != nil {
				t.w.violation("append to %s answered %q", ri.id, a.body)
				return false
			}
			t.w.addAck(&ack{thread: ri.thread, run: ri.id, keys: keys, next: r.Next})
			t.w.setExpiry(ri, r.Expiry)
			t.w.fire(faultAppend)
			return true
		case a.status == 204:
			t.w.stats.duplicates.Add(1)
			t.w.addAck(&ack{thread: ri.thread, run: ri.id, keys: keys})
			t.w.fire(faultAppend)
			return true
		case a.status == 410:
			t.w.stats.leaseLost.Add(1)
			t.w.lost(ri)
			return false
		default:
			t.w.violation("append %d to run %s answered %d %s", seq, ri.id, a.status, a.body)
			return false
		}
	}
}

func (w *world) setExpiry(ri *runInfo, at time.Time) {
	w.mu.Lock()
	if at.After(ri.expiry) {
		ri.expiry = at
	}
	w.mu.Unlock()
}

func (w *world) abandon(ri *runInfo) {
	w.mu.Lock()
	ri.abandoned = true
	w.mu.Unlock()
	w.stats.abandoned.Add(1)
}

func (w *world) lost(ri *runInfo) {
	w.mu.Lock()
	ri.lost = true
	w.mu.Unlock()
}
