package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

func newEngine(t *testing.T, st store.Store, opts engine.Options) *engine.Engine {
	t.Helper()
	e := engine.New(st, opts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func setup(t *testing.T) (*engine.Engine, store.Store) {
	st := testutil.OpenStore(t, "")
	return newEngine(t, st, engine.Options{}), st
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustThread(t *testing.T, e *engine.Engine, id string) {
	t.Helper()
	if _, _, err := e.CreateThread(ctxT(t), id, nil); err != nil {
		t.Fatalf("create thread %s: %v", id, err)
	}
}

func userInput(text string) tether.RunInput {
	return tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: text}}}
}

func mustRun(t *testing.T, e *engine.Engine, thread string, req engine.RunRequest) tether.Run {
	t.Helper()
	if req.Agent == "" {
		req.Agent = "echo"
	}
	rc, err := e.CreateRun(ctxT(t), thread, req)
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	return rc.Run
}

func mustClaim(t *testing.T, e *engine.Engine, agent string) *engine.Claim {
	t.Helper()
	c, err := e.Claim(ctxT(t), engine.ClaimRequest{WorkerID: "w1", Agents: []string{agent}, Wait: 5 * time.Second})
	if err != nil || c == nil {
		t.Fatalf("claim: %v, %v", c, err)
	}
	return c
}

func mustAppend(t *testing.T, e *engine.Engine, c *engine.Claim, evs ...*tether.Event) *engine.AppendResult {
	t.Helper()
	res, err := e.Append(ctxT(t), c.Run.ID, c.Lease.Token, evs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

// answer streams a complete assistant answer made of words.
func answer(msgID string, words ...string) []*tether.Event {
	evs := []*tether.Event{{Type: tether.EventMessageStarted, MessageID: msgID, Role: tether.RoleAssistant}}
	for _, w := range words {
		evs = append(evs, &tether.Event{Type: tether.EventTextDelta, MessageID: msgID, Delta: w})
	}
	return append(evs, &tether.Event{Type: tether.EventMessageFinished, MessageID: msgID, Status: "done"})
}

func finished(status tether.RunStatus) *tether.Event {
	return &tether.Event{Type: tether.EventRunFinished, Status: string(status)}
}

// readAll reads a thread's whole log.
func readAll(t *testing.T, st store.Store, thread string) []*tether.Event {
	t.Helper()
	var out []*tether.Event
	after := tether.OffsetStart
	for {
		recs, err := st.ReadEvents(ctxT(t), thread, after, 500)
		if err != nil {
			t.Fatalf("read events: %v", err)
		}
		for _, r := range recs {
			ev, err := r.Decode()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
			after = r.Offset
		}
		if len(recs) < 500 {
			return out
		}
	}
}

func types(evs []*tether.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Type)
	}
	return b.String()
}

// drain reads a subscription until it ends (io.EOF) or until stop says so.
func drain(t *testing.T, sub *engine.Subscription, stop func([]*tether.Record) bool) []*tether.Record {
	t.Helper()
	var out []*tether.Record
	ctx := ctxT(t)
	for {
		recs, err := sub.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("next: %v (after %d records)", err, len(out))
		}
		out = append(out, recs...)
		if stop != nil && stop(out) {
			return out
		}
	}
}

func wantCode(t *testing.T, err error, code tether.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := tether.CodeOf(err); got != code {
		t.Fatalf("got %s (%v), want %s", got, err, code)
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
