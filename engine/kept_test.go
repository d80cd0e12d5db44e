package engine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

// The values an event keeps as they came (data, state, metadata, tool
// input and output, an answer) must be UTF-8 and nest at most 256 levels
// whoever sends them: request bodies are checked as they are read, but an
// in-process agent's events reach the engine without a body, and before
// they were stored as they were (TestInProcessEventsAreChecked failed:
// both appends were accepted).
func TestInProcessEventsAreChecked(t *testing.T) {
	e, st := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Agent: "demo"})
	c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "inproc", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || c == nil {
		t.Fatal(err)
	}
	before := len(readAll(t, st, "t1"))
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	for _, ev := range []*tether.Event{
		{Type: tether.EventCustom, Name: "x", Data: json.RawMessage("\"\xff\"")},
		{Type: tether.EventCustom, Name: "x", Data: json.RawMessage(deep)},
		{Type: tether.EventStateSnapshot, State: json.RawMessage(`{"k":"` + "\xc3" + `"}`)},
		{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant, Metadata: json.RawMessage(`{"a":` + deep + `}`)},
	} {
		_, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{ev})
		wantCode(t, err, tether.CodeBadRequest)
	}
	if n := len(readAll(t, st, "t1")); n != before {
		t.Fatalf("%d events written", n-before)
	}
	// Deep enough is fine.
	ok := strings.Repeat("[", 250) + strings.Repeat("]", 250)
	mustAppend(t, e, c, &tether.Event{Type: tether.EventCustom, Name: "x", Data: json.RawMessage(ok)})
}
