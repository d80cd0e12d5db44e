package mapping

import (
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// feed maps the events (one JSON object per line) and returns the Tether
// events, one JSON per line, and the first error.
func feed(m *Mapper, lines string) (string, error) {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		evs, err := m.Event([]byte(l))
		for _, e := range evs {
			b, _ := json.Marshal(e)
			out = append(out, normal(strings.Replace(string(b), `"ts":null,`, "", 1)))
		}
		if err != nil {
			return strings.Join(out, "\n"), err
		}
	}
	return strings.Join(out, "\n"), nil
}

// squash normalizes expected lines like feed's.
func squash(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, normal(l))
		}
	}
	return strings.Join(out, "\n")
}

// normal re-encodes a JSON object with its keys sorted.
func normal(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestMapping(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		taken          []string
		waiting        string // the request of a run that waits, as JSON
	}{{
		name: "text, then the run finishes",
		in: `{"type":"RUN_STARTED","threadId":"t","runId":"x"}
			{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}
			{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"}
			{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""}
			{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"lo"}
			{"type":"TEXT_MESSAGE_END","messageId":"m1"}
			{"type":"RUN_FINISHED","threadId":"t","runId":"x","outcome":{"type":"success"}}`,
		want: `{"type":"message.started","message_id":"m1","role":"assistant"}
			{"type":"text.delta","message_id":"m1","delta":"Hel"}
			{"type":"text.delta","message_id":"m1","delta":"lo"}
			{"type":"message.finished","message_id":"m1","status":"done"}
			{"type":"run.finished","status":"done"}`,
	}, {
		name: "reasoning, then text in another message",
		in: `{"type":"RUN_STARTED"}
			{"type":"REASONING_START","messageId":"r1"}
			{"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"}
			{"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"hmm"}
			{"type":"REASONING_MESSAGE_END","messageId":"r1"}
			{"type":"REASONING_END","messageId":"r1"}
			{"type":"TEXT_MESSAGE_START","messageId":"m1"}
			{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"ok"}
			{"type":"TEXT_MESSAGE_END","messageId":"m1"}
			{"type":"RUN_FINISHED"}`,
		want: `{"type":"message.started","message_id":"r1","role":"assistant"}
			{"type":"reasoning.delta","message_id":"r1","delta":"hmm"}
			{"type":"message.finished","message_id":"r1","status":"done"}
			{"type":"message.started","message_id":"m1","role":"assistant"}
			{"type":"text.delta","message_id":"m1","delta":"ok"}
			{"type":"message.finished","message_id":"m1","status":"done"}
			{"type":"run.finished","status":"done"}`,
	}, {
		name: "a tool call in its ended parent (pydantic-ai), its result, the answer",
		in: `{"type":"RUN_STARTED"}
			{"type":"TEXT_MESSAGE_START","messageId":"p","role":"assistant"}
			{"type":"TEXT_MESSAGE_END","messageId":"p"}
			{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"lookup","parentMessageId":"p"}
			{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"city\":"}
			{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"\"Paris\"}"}
			{"type":"TOOL_CALL_END","toolCallId":"c1"}
			{"type":"TOOL_CALL_RESULT","messageId":"tr","toolCallId":"c1","content":"sunny","role":"tool"}
			{"type":"TEXT_MESSAGE_START","messageId":"a","role":"assistant"}
			{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"Sunny."}
			{"type":"TEXT_MESSAGE_END","messageId":"a"}
			{"type":"RUN_FINISHED","outcome":{"type":"success"}}`,
		want: `{"type":"message.started","message_id":"p","role":"assistant"}
			{"type":"tool.started","message_id":"p","call_id":"c1","name":"lookup"}
			{"type":"tool.delta","message_id":"p","call_id":"c1","delta":"{\"city\":"}
			{"type":"tool.delta","message_id":"p","call_id":"c1","delta":"\"Paris\"}"}
			{"type":"tool.finished","message_id":"p","call_id":"c1","output":"sunny"}
			{"type":"message.finished","message_id":"p","status":"done"}
			{"type":"message.started","message_id":"a","role":"assistant"}
			{"type":"text.delta","message_id":"a","delta":"Sunny."}
			{"type":"message.finished","message_id":"a","status":"done"}
			{"type":"run.finished","status":"done"}`,
	}, {
		name: "a tool call without a parent, a pending frontend call",
		in: `{"type":"RUN_STARTED"}
			{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"confirm"}
			{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}
			{"type":"TOOL_CALL_END","toolCallId":"c1"}
			{"type":"RUN_FINISHED","outcome":{"type":"success","pendingToolCallIds":["c1"]}}`,
		want: `{"type":"message.started","message_id":"run1-m1","role":"assistant"}
			{"type":"tool.started","message_id":"run1-m1","call_id":"c1","name":"confirm"}
			{"type":"tool.delta","message_id":"run1-m1","call_id":"c1","delta":"{}"}
			{"type":"custom","name":"ag-ui.RUN_FINISHED","data":{"type":"RUN_FINISHED","outcome":{"type":"success","pendingToolCallIds":["c1"]}}}
			{"type":"run.finished","status":"done"}`,
	}, {
		name: "chunks",
		in: `{"type":"RUN_STARTED"}
			{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"a"}
			{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}
			{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"f","parentMessageId":"m1","delta":"{"}
			{"type":"TOOL_CALL_CHUNK","delta":"}"}
			{"type":"RUN_FINISHED"}`,
		want: `{"type":"message.started","message_id":"m1","role":"assistant"}
			{"type":"text.delta","message_id":"m1","delta":"a"}
			{"type":"text.delta","message_id":"m1","delta":"b"}
			{"type":"tool.started","message_id":"m1","call_id":"c1","name":"f"}
			{"type":"tool.delta","message_id":"m1","call_id":"c1","delta":"{"}
			{"type":"tool.delta","message_id":"m1","call_id":"c1","delta":"}"}
			{"type":"run.finished","status":"done"}`,
	}, {
		name: "state, steps, raw, messages, custom and unknown events",
		in: `{"type":"RUN_STARTED"}
			{"type":"STEP_STARTED","stepName":"plan"}
			{"type":"STATE_SNAPSHOT","snapshot":{"steps":[]},"rawEvent":{"x":1}}
			{"type":"STATE_DELTA","delta":[{"op":"add","path":"/steps/-","value":"plan"}]}
			{"type":"STEP_FINISHED","stepName":"plan"}
			{"type":"RAW","event":{"any":"thing"},"source":"lg"}
			{"type":"CUSTOM","name":"progress","value":{"pct":50}}
			{"type":"CUSTOM","name":"ping"}
			{"type":"MESSAGES_SNAPSHOT","messages":[]}
			{"type":"ACTIVITY_SNAPSHOT","messageId":"x","activityType":"plan","content":{"a":1}}
			{"type":"SOMETHING_NEW","delta":5}
			{"type":"RUN_FINISHED"}`,
		want: `{"type":"custom","name":"ag-ui.STEP_STARTED","data":{"type":"STEP_STARTED","stepName":"plan"}}
			{"type":"state.snapshot","state":{"steps":[]}}
			{"type":"state.delta","patch":[{"op":"add","path":"/steps/-","value":"plan"}]}
			{"type":"custom","name":"ag-ui.STEP_FINISHED","data":{"type":"STEP_FINISHED","stepName":"plan"}}
			{"type":"custom","name":"ag-ui.RAW","data":{"type":"RAW","event":{"any":"thing"},"source":"lg"}}
			{"type":"custom","name":"progress","data":{"pct":50}}
			{"type":"custom","name":"ping","data":null}
			{"type":"custom","name":"ag-ui.MESSAGES_SNAPSHOT","data":{"type":"MESSAGES_SNAPSHOT","messages":[]}}
			{"type":"custom","name":"ag-ui.ACTIVITY_SNAPSHOT","data":{"type":"ACTIVITY_SNAPSHOT","messageId":"x","activityType":"plan","content":{"a":1}}}
			{"type":"custom","name":"ag-ui.SOMETHING_NEW","data":{"type":"SOMETHING_NEW","delta":5}}
			{"type":"run.finished","status":"done"}`,
	}, {
		name: "an interrupt makes the run wait; its messages stay open",
		in: `{"type":"RUN_STARTED"}
			{"type":"TEXT_MESSAGE_START","messageId":"p"}
			{"type":"TEXT_MESSAGE_END","messageId":"p"}
			{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"rm","parentMessageId":"p"}
			{"type":"TOOL_CALL_END","toolCallId":"c1"}
			{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"int-c1","reason":"tool_call","toolCallId":"c1"}]}}`,
		want: `{"type":"message.started","message_id":"p","role":"assistant"}
			{"type":"tool.started","message_id":"p","call_id":"c1","name":"rm"}`,
		waiting: `{"id":"int-c1","kind":"ag-ui.interrupt","payload":{"interrupts":[{"id":"int-c1","reason":"tool_call","toolCallId":"c1"}]}}`,
	}, {
		name: "two interrupts: a request id of the run's own",
		in: `{"type":"RUN_STARTED"}
			{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"a","reason":"x"},{"id":"b","reason":"y"}]}}`,
		waiting: `{"id":"run1-i1","kind":"ag-ui.interrupt","payload":{"interrupts":[{"id":"a","reason":"x"},{"id":"b","reason":"y"}]}}`,
	}, {
		name: "cancelled",
		in: `{"type":"RUN_STARTED"}
			{"type":"TEXT_MESSAGE_START","messageId":"m1"}
			{"type":"RUN_FINISHED","outcome":{"type":"cancelled"}}`,
		want: `{"type":"message.started","message_id":"m1","role":"assistant"}
			{"type":"run.finished","status":"cancelled"}`,
	}, {
		name: "RUN_ERROR with a code",
		in: `{"type":"RUN_STARTED"}
			{"type":"RUN_ERROR","message":"quota","code":"rate_limited"}`,
		want: `{"type":"run.finished","status":"error","error":{"code":"rate_limited","message":"quota"}}`,
	}, {
		name: "RUN_ERROR first, without a code or message",
		in:   `{"type":"RUN_ERROR","message":""}`,
		want: `{"type":"run.finished","status":"error","error":{"code":"agent_error","message":"The agent reported an error."}}`,
	}, {
		name:  "ids the thread has, or that Tether does not take, are replaced",
		taken: []string{"msg_1"},
		in: `{"type":"RUN_STARTED"}
			{"type":"TEXT_MESSAGE_START","messageId":"msg_1"}
			{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"a"}
			{"type":"TOOL_CALL_START","toolCallId":"call/1","toolCallName":"f","parentMessageId":"msg_1"}
			{"type":"TEXT_MESSAGE_START","messageId":"x y"}
			{"type":"TOOL_CALL_RESULT","messageId":"r","toolCallId":"call/1","content":"{\"n\":1}"}
			{"type":"TOOL_CALL_RESULT","messageId":"r2","toolCallId":"earlier","content":"ok"}`,
		want: `{"type":"message.started","message_id":"run1-m1","role":"assistant"}
			{"type":"text.delta","message_id":"run1-m1","delta":"a"}
			{"type":"tool.started","message_id":"run1-m1","call_id":"run1-c2","name":"f"}
			{"type":"message.started","message_id":"run1-m3","role":"assistant"}
			{"type":"tool.finished","message_id":"run1-m1","call_id":"run1-c2","output":"{\"n\":1}"}
			{"type":"message.created","message_id":"r2","message":{"id":"r2","thread_id":"","run_id":"","role":"tool","status":"","parts":[{"type":"text","text":"ok"}],"metadata":{"tool_call_id":"earlier"},"started_at":null,"last_update_at":null}}`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			taken := map[string]bool{}
			for _, id := range c.taken {
				taken[id] = true
			}
			m := New(Options{RunID: "run1", Taken: func(id string) bool { return taken[id] }})
			got, err := feed(m, c.in)
			if err != nil {
				t.Fatalf("%v after\n%s", err, got)
			}
			if want := squash(c.want); got != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
			var w string
			if r := m.Waiting(); r != nil {
				b, _ := json.Marshal(r)
				w = string(b)
			}
			if w != c.waiting {
				t.Fatalf("waiting %s, want %s", w, c.waiting)
			}
		})
	}
}

// What breaks AG-UI is refused with an error that names no content of
// the upstream's but its event types.
func TestMappingMalformed(t *testing.T) {
	const start = `{"type":"RUN_STARTED"}` + "\n"
	for name, in := range map[string]string{
		"not JSON":                          `data that is not JSON`,
		"an array":                          `[1]`,
		"no type":                           `{"messageId":"m"}`,
		"a type that is not a string":       `{"type":5}`,
		"content before RUN_STARTED":        `{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		"RUN_STARTED twice":                 start + `{"type":"RUN_STARTED"}`,
		"content of no message":             start + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`,
		"content after the end":             start + `{"type":"TEXT_MESSAGE_START","messageId":"m"}` + "\n" + `{"type":"TEXT_MESSAGE_END","messageId":"m"}` + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`,
		"a delta that is not a string":      start + `{"type":"TEXT_MESSAGE_START","messageId":"m"}` + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":5}`,
		"no delta":                          start + `{"type":"TEXT_MESSAGE_START","messageId":"m"}` + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}`,
		"a start without an id":             start + `{"type":"TEXT_MESSAGE_START"}`,
		"an unknown role":                   start + `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"robot"}`,
		"args of no call":                   start + `{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x"}`,
		"a call without a name":             start + `{"type":"TOOL_CALL_START","toolCallId":"c"}`,
		"a call started twice":              start + `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}` + "\n" + `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`,
		"two results":                       start + `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}` + "\n" + `{"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"r","content":"a"}` + "\n" + `{"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"r","content":"a"}`,
		"a result that is not a string":     start + `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}` + "\n" + `{"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"r","content":{}}`,
		"a state delta that is not a patch": start + `{"type":"STATE_DELTA","delta":{"op":"add"}}`,
		"a state delta that does not apply": start + `{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/x"}]}`,
		"a snapshot without a snapshot":     start + `{"type":"STATE_SNAPSHOT"}`,
		"a custom without a name":           start + `{"type":"CUSTOM","value":1}`,
		"an event after RUN_FINISHED":       start + `{"type":"RUN_FINISHED"}` + "\n" + `{"type":"RAW","event":{}}`,
		"an outcome of an unknown type":     start + `{"type":"RUN_FINISHED","outcome":{"type":"maybe"}}`,
		"an interrupt without interrupts":   start + `{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := feed(New(Options{RunID: "run1"}), in)
			if !IsMalformed(err) {
				t.Fatalf("error %v, want a malformed event", err)
			}
			if strings.Contains(err.Error(), "Paris") || strings.Contains(err.Error(), "{") {
				t.Fatalf("the error quotes the upstream: %v", err)
			}
		})
	}
}

// The state a Mapper follows is what the thread's would be.
func TestMappingState(t *testing.T) {
	m := New(Options{RunID: "run1", State: json.RawMessage(`{"n":1}`)})
	_, err := feed(m, `{"type":"RUN_STARTED"}
		{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}`)
	if err != nil || string(m.State()) != `{"n":2}` {
		t.Fatalf("state %s (%v)", m.State(), err)
	}
	_, err = feed(m, `{"type":"STATE_SNAPSHOT","snapshot":null}`)
	if err != nil || m.State() != nil {
		t.Fatalf("state %s (%v)", m.State(), err)
	}
}

// After an interrupt, the answering stream continues the same messages:
// the call's result goes to the call made before the interrupt.
func TestMappingResume(t *testing.T) {
	m := New(Options{RunID: "run1"})
	if _, err := feed(m, `{"type":"RUN_STARTED"}
		{"type":"TEXT_MESSAGE_START","messageId":"p"}
		{"type":"TEXT_MESSAGE_END","messageId":"p"}
		{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"rm","parentMessageId":"p"}
		{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"path\":\"a\"}"}
		{"type":"TOOL_CALL_END","toolCallId":"c1"}
		{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"int-c1","reason":"tool_call"}]}}`); err != nil {
		t.Fatal(err)
	}
	msgs, _ := json.Marshal(m.Messages())
	if want := `[{"content":"","id":"p","role":"assistant","toolCalls":[{"function":{"arguments":"{\"path\":\"a\"}","name":"rm"},"id":"c1","type":"function"}]}]`; string(msgs) != want {
		t.Fatalf("messages %s", msgs)
	}
	m.Resume()
	got, err := feed(m, `{"type":"RUN_STARTED"}
		{"type":"TOOL_CALL_RESULT","messageId":"x","toolCallId":"c1","content":"deleted"}
		{"type":"RUN_FINISHED"}`)
	want := squash(`{"type":"tool.finished","message_id":"p","call_id":"c1","output":"deleted"}
		{"type":"message.finished","message_id":"p","status":"done"}
		{"type":"run.finished","status":"done"}`)
	if err != nil || got != want {
		t.Fatalf("got\n%s\nwant\n%s (%v)", got, want, err)
	}
	_ = tether.EventRunFinished
}

// A large event kept whole loses its rawEvent; a RAW event still too
// large is dropped, rather than end the run on the size of an event.
func TestMappingLargeKept(t *testing.T) {
	big := strings.Repeat("x", MaxKept)
	m := New(Options{RunID: "run1"})
	if _, err := m.Event([]byte(`{"type":"RUN_STARTED"}`)); err != nil {
		t.Fatal(err)
	}
	evs, err := m.Event([]byte(`{"type":"STEP_STARTED","stepName":"a","rawEvent":{"big":"` + big + `"}}`))
	if err != nil || len(evs) != 1 || string(evs[0].Data) != `{"stepName":"a","type":"STEP_STARTED"}` {
		t.Fatalf("%v %v", evs, err)
	}
	evs, err = m.Event([]byte(`{"type":"RAW","event":{"big":"` + big + `"}}`))
	if err != nil || len(evs) != 0 {
		t.Fatalf("a RAW event over MaxKept: %d events, %v", len(evs), err)
	}
	evs, err = m.Event([]byte(`{"type":"RAW","event":{"small":1}}`))
	if err != nil || len(evs) != 1 {
		t.Fatalf("a small RAW event: %d events, %v", len(evs), err)
	}
}

// A STATE_SNAPSHOT of the state the thread has is not stored again
// (LangGraph sends its whole state after every step): the same JSON text,
// whatever its spacing; any change is stored.
func TestMappingSameStateSnapshot(t *testing.T) {
	m := New(Options{RunID: "run1", State: json.RawMessage(`{"n":1}`)})
	got, err := feed(m, `{"type":"RUN_STARTED"}
		{"type":"STATE_SNAPSHOT","snapshot":{"n": 1}}
		{"type":"STATE_SNAPSHOT","snapshot":{"n":2}}
		{"type":"STATE_SNAPSHOT","snapshot":{"n":2}}
		{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":3}]}
		{"type":"STATE_SNAPSHOT","snapshot":{"n":3}}
		{"type":"STATE_SNAPSHOT","snapshot":{"n":3.0}}
		{"type":"STATE_SNAPSHOT","snapshot":null}
		{"type":"STATE_SNAPSHOT","snapshot":null}`)
	want := squash(`{"type":"state.snapshot","state":{"n":2}}
		{"type":"state.delta","patch":[{"op":"replace","path":"/n","value":3}]}
		{"type":"state.snapshot","state":{"n":3.0}}
		{"type":"state.snapshot","state":null}`)
	if err != nil || got != want {
		t.Fatalf("got\n%s\nwant\n%s (%v)", got, want, err)
	}
}

// An upstream that interrupts twice in a run under the same interrupt id
// gets a request id of the run's own the second time: a run may not ask
// again under a request id it had answered (the worker rules refuse it,
// as a client's repeat of the first answer would answer the second).
func TestMappingInterruptIDReused(t *testing.T) {
	m := New(Options{RunID: "run1"})
	interrupt := `{"type":"RUN_STARTED"}
		{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"ask","reason":"x"}]}}`
	var ids []string
	for range 2 {
		if _, err := feed(m, interrupt); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Waiting().ID)
		m.Resume()
	}
	if ids[0] != "ask" || ids[1] == "ask" || !tether.ValidID(ids[1]) {
		t.Fatalf("request ids %q: want ask, then one of the run's own", ids)
	}
}
