package aisdk_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
)

// wideAnswer is a finished run whose answer has n tool calls, each with a
// data part, over two messages.
func wideAnswer(n int) *tether.Snapshot {
	var parts []tether.Part
	for i := range n {
		parts = append(parts,
			tether.Part{Type: tether.PartTool, CallID: fmt.Sprintf("c%d", i), Name: "lookup",
				Input: json.RawMessage(`{"q":1}`), Output: json.RawMessage(`"ok"`), Status: tether.ToolDone},
			tether.Part{Type: tether.PartData, Name: "row", Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i))})
	}
	half := len(parts) / 2
	msgs := []tether.Message{
		{ID: "m1", RunID: "r", Role: tether.RoleAssistant, Status: tether.MessageDone, Parts: parts[:half]},
		{ID: "m2", RunID: "r", Role: tether.RoleAssistant, Status: tether.MessageDone, Parts: parts[half:]},
	}
	return &tether.Snapshot{Runs: []tether.Run{{ID: "r", Status: tether.RunDone}}, Messages: msgs}
}

// TestMessagesOfAWideAnswer: Messages, which finds parts through an index,
// builds the same message as the chunks applied one by one with Apply.
func TestMessagesOfAWideAnswer(t *testing.T) {
	snap := wideAnswer(300)
	chunks, _ := aisdk.Prelude(snap)
	var want aisdk.UIMessage
	for _, c := range chunks {
		aisdk.Apply(&want, c)
	}
	got := aisdk.Messages(snap)
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("Messages:\n%.2000s\nApply, chunk by chunk:\n%.2000s", g, w)
	}
	if len(want.Parts) < 300 {
		t.Fatalf("%d parts: the answer is not wide", len(want.Parts))
	}
}

// BenchmarkMessagesOfAWideAnswer: what GET …/messages costs for a run with
// n tool calls (and n data parts).
func BenchmarkMessagesOfAWideAnswer(b *testing.B) {
	for _, n := range []int{2500, 10000} {
		snap := wideAnswer(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				aisdk.Messages(snap)
			}
		})
	}
}
