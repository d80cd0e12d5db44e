package tether

import "encoding/json"

// A run may make an earlier answer of its thread again (useChat's
// regenerate): its metadata names the answer it replaces,
// {"ai_sdk": {"regenerates": "<id>"}}, the id of the first assistant
// message of the run that gave it (or that run's id, for a run that gave
// none). The replaced answer stays in the log and in the thread's
// snapshot; the conversation a run is given (Conversation: the claim's
// messages) and the AI SDK's message list leave it out.

// RegeneratesKey is the key of a run's metadata under which
// {"regenerates": "<id>"} names the answer the run replaces.
const RegeneratesKey = "ai_sdk"

// Regenerates returns the id of the answer a run's metadata says the run
// replaces, or "".
func Regenerates(metadata json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return ""
	}
	var v struct {
		Regenerates string `json:"regenerates"`
	}
	if json.Unmarshal(m[RegeneratesKey], &v) != nil {
		return ""
	}
	return v.Regenerates
}

// Conversation returns a thread's messages (msgs, of runs) as a run is
// given them: all but the answers runs replace (Regenerates). An answer
// is what the run that gave it added after its input messages (its
// assistant and tool messages), named by its first assistant message.
// The replaced answers of every run count, so that a chain of
// regenerates leaves out each answer it made again.
func Conversation(runs []Run, msgs []Message) []Message {
	replaced := map[string]bool{}
	for _, r := range runs {
		if id := Regenerates(r.Metadata); id != "" {
			replaced[id] = true
		}
	}
	if len(replaced) == 0 {
		return msgs
	}
	inputs := map[string]int{}
	gone := map[string]bool{} // the runs whose answer is replaced
	for _, r := range runs {
		inputs[r.ID] = len(r.Input.Messages)
		gone[r.ID] = replaced[r.ID]
	}
	// each calls fn with each message and whether it is its run's
	// output (not one of the input messages the run was created with).
	each := func(fn func(m Message, output bool)) {
		n := map[string]int{}
		for _, m := range msgs {
			n[m.RunID]++
			fn(m, n[m.RunID] > inputs[m.RunID])
		}
	}
	each(func(m Message, output bool) {
		if output && m.Role == RoleAssistant && replaced[m.ID] {
			gone[m.RunID] = true
		}
	})
	out := make([]Message, 0, len(msgs))
	each(func(m Message, output bool) {
		if !output || !gone[m.RunID] {
			out = append(out, m)
		}
	})
	return out
}
