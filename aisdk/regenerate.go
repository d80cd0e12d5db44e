package aisdk

import (
	tether "github.com/tetherhq/tether"
)

// useChat's regenerate: the answer a regenerate-message replaces, and
// what keys its run.

// regenerateTarget returns the answer a regenerate-message replaces ("" if
// the question it names has none: its run failed or was stopped before
// it answered) and what keys the run. The question is messageId's (an
// answer, or the user message it answers), else the request's last
// message (useChat leaves the answer it regenerates out of the messages
// it sends), else the chat's last. Only the answer to the chat's last
// question can be replaced: the log is append-only, so an answer made
// again for an earlier one would follow the later questions, and be made
// with them in view.
func regenerateTarget(req *ChatRequest, snap *tether.Snapshot) (target, key string, err error) {
	anchor := req.MessageID
	if anchor == "" && len(req.Messages) > 0 {
		anchor = req.Messages[len(req.Messages)-1].ID
	}
	var ui []UIMessage
	var lastRun string
	if snap != nil {
		ui = Messages(snap)
		if n := len(snap.Runs); n > 0 {
			lastRun = snap.Runs[n-1].ID
		}
	}
	if anchor == "" && len(ui) > 0 {
		anchor = ui[len(ui)-1].ID
	}
	at := -1
	for i, m := range ui {
		if m.ID == anchor {
			at = i
		}
	}
	switch {
	case at < 0 && req.MessageID != "":
		// Not a message of the chat's: an answer already replaced (a
		// stale tab; its key finds the run that replaced it), or one
		// the chat never had.
		return anchor, anchor, nil
	case anchor == "":
		return "", "", tether.Errorf(tether.CodeBadRequest, "nothing to regenerate: the chat has no messages")
	case at < 0:
		// A question the chat does not hold yet (the run's input).
		return "", anchor, nil
	case ui[at].Role == "assistant":
		target = anchor
	}
	for _, m := range ui[at+1:] {
		switch m.Role {
		case "user":
			return "", "", tether.Errorf(tether.CodeConflict, "message %s is not the answer to the chat's last question: only that answer can be made again (the chat's log is append-only)", anchor)
		case "assistant":
			target = m.ID
		}
	}
	if target != "" {
		return target, target, nil
	}
	// No answer to replace: the question is asked again, once per run
	// that ended without answering it.
	return "", lastRun, nil
}

// SentAgainKey returns the idempotency key a regenerate-message has on the
// chat (snap) as it stood before its active run was made: the key of that
// run if this request made it, and is sent again (a 503 or a dropped
// connection hid that it landed). useChat's plain regenerate() names no
// answer: it is keyed by the answer to the chat's last question, and once
// its run is made that answer is the run's own (the one it replaces is
// left out), so the request sent again plans another key, which the
// chat's active run refuses. The caller asks whether the key made the
// active run: then the request is the one that made it (the same request
// keyed the same), and another (other messages, or a run another request
// made) is not. "" for a request that is no regenerate, or a chat whose
// last run is not active.
func SentAgainKey(req *ChatRequest, snap *tether.Snapshot) string {
	if req.Trigger != TriggerRegenerate || snap == nil {
		return ""
	}
	active := snap.Thread.ActiveRunID
	if n := len(snap.Runs); active == "" || n == 0 || snap.Runs[n-1].ID != active {
		return ""
	}
	before := &tether.Snapshot{Thread: snap.Thread, Runs: snap.Runs[:len(snap.Runs)-1]}
	before.Thread.ActiveRunID = ""
	for _, m := range snap.Messages {
		if m.RunID != active {
			before.Messages = append(before.Messages, m)
		}
	}
	p, err := PlanChat(req, before)
	if err != nil {
		return ""
	}
	return p.Key
}
