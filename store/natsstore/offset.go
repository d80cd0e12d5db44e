package natsstore

import (
	"encoding/base32"
	"time"

	tether "github.com/tetherhq/tether"
)

// An event's offset is tether.FormatOffset(epoch, seq*eventsPerMsg + i): seq
// is the stream sequence of the log message that holds the batch, i the
// event's index in it. Stream sequences are never reused (a purge leaves
// them behind), so offsets are unique in the stream, increase along each
// thread's subject, and map back to (seq, i) without a lookup.
const (
	// eventsPerMsg bounds the events of one batch.
	eventsPerMsg = 10_000
	// maxMsgSeq keeps offsets at 16 sequence digits.
	maxMsgSeq = 9_999_999_999_999_999 / eventsPerMsg
	// maxEpoch keeps offsets at 10 epoch digits.
	maxEpoch  = 9_999_999_999
	offsetLen = 10 + 1 + 16
)

// putOffset writes the offset of event seq in epoch to dst[:offsetLen], as
// tether.FormatOffset would, without fmt.
func putOffset(dst []byte, epoch, seq uint64) {
	_ = dst[offsetLen-1]
	for i := 9; i >= 0; i-- {
		dst[i] = byte('0' + epoch%10)
		epoch /= 10
	}
	dst[10] = '_'
	for i := offsetLen - 1; i > 10; i-- {
		dst[i] = byte('0' + seq%10)
		seq /= 10
	}
}

// offsets returns the offsets of n events of the message with sequence
// msgSeq, sharing one string.
func offsets(epoch, msgSeq uint64, n int) []tether.Offset {
	if n == 0 {
		return nil
	}
	buf := make([]byte, n*offsetLen)
	for i := range n {
		putOffset(buf[i*offsetLen:], epoch, msgSeq*eventsPerMsg+uint64(i))
	}
	all := string(buf)
	out := make([]tether.Offset, n)
	for i := range out {
		out[i] = tether.Offset(all[i*offsetLen : (i+1)*offsetLen])
	}
	return out
}

func offsetOf(epoch, msgSeq uint64, i int) tether.Offset {
	var b [offsetLen]byte
	putOffset(b[:], epoch, msgSeq*eventsPerMsg+uint64(i))
	return tether.Offset(b[:])
}

// tokenEncoding makes any ID one subject token (and one KV key token):
// lowercase base32hex, which sorts like its input and has no character a
// subject or key forbids.
var tokenEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// token returns the subject token of an ID; "_" stands for the empty ID.
func token(id string) string {
	if id == "" {
		return "_"
	}
	return tokenEncoding.EncodeToString([]byte(id))
}

// fromMillis is the thread time of a row; the zero time maps to its own
// Unix milliseconds, so it round-trips.
func fromMillis(ms int64) tether.Time { return tether.At(time.UnixMilli(ms)) }

func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
