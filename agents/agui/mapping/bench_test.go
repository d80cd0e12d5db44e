package mapping

import (
	"testing"
)

// BenchmarkMapTextContent maps TEXT_MESSAGE_CONTENT events: the hot path
// of a streamed answer, per upstream token.
func BenchmarkMapTextContent(b *testing.B) {
	m := New(Options{RunID: "run1"})
	for _, l := range []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`} {
		if _, err := m.Event([]byte(l)); err != nil {
			b.Fatal(err)
		}
	}
	ev := []byte(`{"type":"TEXT_MESSAGE_CONTENT","timestamp":1796145961065,"messageId":"m1","delta":"word1 "}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		if _, err := m.Event(ev); err != nil {
			b.Fatal(err)
		}
	}
}
