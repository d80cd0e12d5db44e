// Package aguitest checks AG-UI streams in tests: a Verifier with the rules
// of @ag-ui/client's verifyEvents (1.0.0) that a projection can break, and
// a Reducer that folds events into messages as HttpAgent's default reducer
// does (the parts that hold content).
package aguitest

import (
	"fmt"
	"slices"
	"strings"
)

// Event is one AG-UI event decoded from JSON.
type Event = map[string]any

func typeOf(e Event) string { s, _ := e["type"].(string); return s }

// Verifier checks a stream of AG-UI events by the rules of @ag-ui/client's
// verifyEvents (1.0.0), the parts the projection can break.
type Verifier struct {
	started, finished, errored bool
	first                      bool
	text, reasoning, spans     map[string]bool
	tools                      map[string]bool
	steps                      map[string]bool
}

// NewVerifier returns a verifier of a new stream.
func NewVerifier() *Verifier {
	v := &Verifier{first: true}
	v.reset()
	return v
}

func (v *Verifier) reset() {
	v.text, v.reasoning, v.spans, v.tools, v.steps = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	v.finished, v.errored = false, false
}

// Check takes the next event; it returns why the stream is invalid there.
func (v *Verifier) Check(e Event) error {
	t := typeOf(e)
	id := func(k string) string { s, _ := e[k].(string); return s }
	if v.errored && t != "RUN_STARTED" {
		return fmt.Errorf("%s after RUN_ERROR", t)
	}
	if v.finished && t != "RUN_STARTED" && t != "RUN_ERROR" {
		return fmt.Errorf("%s after RUN_FINISHED", t)
	}
	if v.first {
		v.first = false
		if t != "RUN_STARTED" && t != "RUN_ERROR" {
			return fmt.Errorf("first event %s", t)
		}
	} else if t == "RUN_STARTED" && v.started && !v.finished && !v.errored {
		return fmt.Errorf("RUN_STARTED while a run is active")
	}
	open := func(set map[string]bool, k, what string) error {
		if set[id(k)] {
			return fmt.Errorf("%s %s already open", what, id(k))
		}
		set[id(k)] = true
		return nil
	}
	need := func(set map[string]bool, k, what string, end bool) error {
		if !set[id(k)] {
			return fmt.Errorf("%s: %s %s not open", t, what, id(k))
		}
		if end {
			delete(set, id(k))
		}
		return nil
	}
	switch t {
	case "RUN_STARTED":
		if v.finished || v.errored {
			v.reset()
		}
		v.started = true
	case "TEXT_MESSAGE_START":
		return open(v.text, "messageId", "text message")
	case "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END":
		if t == "TEXT_MESSAGE_CONTENT" && id("delta") == "" {
			return fmt.Errorf("empty delta")
		}
		return need(v.text, "messageId", "text message", t == "TEXT_MESSAGE_END")
	case "TOOL_CALL_START":
		return open(v.tools, "toolCallId", "tool call")
	case "TOOL_CALL_ARGS", "TOOL_CALL_END":
		return need(v.tools, "toolCallId", "tool call", t == "TOOL_CALL_END")
	case "REASONING_START":
		return open(v.spans, "messageId", "reasoning span")
	case "REASONING_MESSAGE_START":
		return open(v.reasoning, "messageId", "reasoning message")
	case "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END":
		return need(v.reasoning, "messageId", "reasoning message", t == "REASONING_MESSAGE_END")
	case "REASONING_END":
		return need(v.spans, "messageId", "reasoning span", true)
	case "STEP_STARTED":
		return open(v.steps, "stepName", "step")
	case "STEP_FINISHED":
		return need(v.steps, "stepName", "step", true)
	case "RUN_FINISHED":
		for what, set := range map[string]map[string]bool{"text": v.text, "reasoning": v.reasoning, "span": v.spans, "tool": v.tools, "step": v.steps} {
			if len(set) > 0 {
				return fmt.Errorf("RUN_FINISHED with %s open: %v", what, set)
			}
		}
		v.finished = true
	case "RUN_ERROR":
		v.errored = true
	}
	return nil
}

// Reducer applies events to a list of AG-UI messages as HttpAgent's
// default reducer does (the parts that hold content, and their order).
type Reducer struct{ Msgs []map[string]any }

func (r *Reducer) find(id string) map[string]any {
	for _, m := range r.Msgs {
		if m["id"] == id {
			return m
		}
	}
	return nil
}

func (r *Reducer) owner(call string) map[string]any {
	for _, m := range r.Msgs {
		if hasCall(m, call) {
			return m
		}
	}
	return nil
}

func hasCall(m map[string]any, call string) bool {
	calls, _ := m["toolCalls"].([]any)
	for _, c := range calls {
		if c.(map[string]any)["id"] == call {
			return true
		}
	}
	return false
}

// Apply folds e into the messages.
func (r *Reducer) Apply(e Event) {
	s := func(k string) string { v, _ := e[k].(string); return v }
	switch typeOf(e) {
	case "RUN_STARTED":
		in, _ := e["input"].(map[string]any)
		msgs, _ := in["messages"].([]any)
		for _, m := range msgs {
			if mm := m.(map[string]any); r.find(mm["id"].(string)) == nil {
				r.Msgs = append(r.Msgs, mm)
			}
		}
	case "MESSAGES_SNAPSHOT":
		var next []map[string]any
		for _, m := range e["messages"].([]any) {
			next = append(next, m.(map[string]any))
		}
		r.Msgs = next
	case "TEXT_MESSAGE_START":
		if r.find(s("messageId")) == nil {
			r.Msgs = append(r.Msgs, map[string]any{"id": s("messageId"), "role": s("role"), "content": ""})
		}
	case "TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT":
		m := r.find(s("messageId"))
		c, _ := m["content"].(string)
		m["content"] = c + s("delta")
	case "REASONING_MESSAGE_START":
		if r.find(s("messageId")) == nil {
			r.Msgs = append(r.Msgs, map[string]any{"id": s("messageId"), "role": "reasoning", "content": ""})
		}
	case "TOOL_CALL_START":
		if r.owner(s("toolCallId")) != nil {
			return
		}
		parent := r.find(s("parentMessageId"))
		if parent == nil {
			parent = map[string]any{"id": s("parentMessageId"), "role": "assistant"}
			r.Msgs = append(r.Msgs, parent)
		}
		calls, _ := parent["toolCalls"].([]any)
		parent["toolCalls"] = append(calls, map[string]any{"id": s("toolCallId"), "type": "function",
			"function": map[string]any{"name": s("toolCallName"), "arguments": ""}})
	case "TOOL_CALL_ARGS":
		for _, c := range r.owner(s("toolCallId"))["toolCalls"].([]any) {
			if c := c.(map[string]any); c["id"] == s("toolCallId") {
				f := c["function"].(map[string]any)
				f["arguments"] = f["arguments"].(string) + s("delta")
			}
		}
	case "TOOL_CALL_RESULT":
		// After the assistant message that made the call and the tool
		// messages that follow it, else at the end.
		m := map[string]any{"id": s("messageId"), "role": "tool", "toolCallId": s("toolCallId"), "content": s("content")}
		i := slices.IndexFunc(r.Msgs, func(x map[string]any) bool { return x["role"] == "assistant" && hasCall(x, s("toolCallId")) })
		if i < 0 {
			r.Msgs = append(r.Msgs, m)
			return
		}
		for i++; i < len(r.Msgs) && r.Msgs[i]["role"] == "tool"; i++ {
		}
		r.Msgs = slices.Insert(r.Msgs, i, m)
	}
}

// Contents maps each message id to what a person sees of it.
func (r *Reducer) Contents() map[string]string {
	out := map[string]string{}
	for _, m := range r.Msgs {
		c, _ := m["content"].(string)
		var calls []string
		tc, _ := m["toolCalls"].([]any)
		for _, c := range tc {
			c := c.(map[string]any)
			f := c["function"].(map[string]any)
			calls = append(calls, fmt.Sprintf("%s:%s(%s)", c["id"], f["name"], f["arguments"]))
		}
		slices.Sort(calls)
		out[m["id"].(string)] = fmt.Sprintf("%s|%s|%s", m["role"], c, strings.Join(calls, ","))
	}
	return out
}

// IDs is the messages' ids in their order.
func (r *Reducer) IDs() []string {
	ids := make([]string, 0, len(r.Msgs))
	for _, m := range r.Msgs {
		ids = append(ids, m["id"].(string))
	}
	return ids
}
