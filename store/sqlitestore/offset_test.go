package sqlitestore

import (
	"testing"

	tether "github.com/tetherhq/tether"
)

func TestFormatOffset(t *testing.T) {
	for _, c := range []struct{ epoch, seq uint64 }{
		{0, 0}, {1, 1}, {1_700_000_000, 42}, {maxEpoch, maxEventID}, {123, 9_999_999}, {1 << 32, 1 << 52},
	} {
		if got, want := formatOffset(c.epoch, c.seq), tether.FormatOffset(c.epoch, c.seq); got != want {
			t.Errorf("formatOffset(%d, %d) = %q, want %q", c.epoch, c.seq, got, want)
		}
	}
	if len(placeholder) != offsetLen {
		t.Fatal("placeholder has the wrong length")
	}
	body := []byte(`{"type":"custom","ts":null}`)
	data := tether.WithOffset(body, placeholder)
	o := formatOffset(5, 6)
	copy(data[placeholderAt:], o)
	if want := tether.WithOffset(body, o); string(data) != string(want) {
		t.Fatalf("patched %s, want %s", data, want)
	}
}

func FuzzFormatOffset(f *testing.F) {
	f.Add(uint64(1_700_000_000), uint64(1))
	f.Fuzz(func(t *testing.T, epoch, seq uint64) {
		epoch, seq = epoch%(maxEpoch+1), seq%(maxEventID+1)
		if got, want := formatOffset(epoch, seq), tether.FormatOffset(epoch, seq); got != want {
			t.Fatalf("formatOffset(%d, %d) = %q, want %q", epoch, seq, got, want)
		}
	})
}
