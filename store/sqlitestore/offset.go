package sqlitestore

import tether "github.com/tetherhq/tether"

// offsetLen is the length of every offset this store makes: Open keeps the
// epoch below 10^10 and the writer keeps event ids below 10^16, the widths
// tether.FormatOffset pads to.
const offsetLen = 10 + 1 + 16

// placeholder stands in for the offset in the JSON the callers prepare, so
// that the writer only copies offsetLen bytes into it: tether.WithOffset
// puts the offset at placeholderAt.
var placeholder = tether.Offset("0000000000_0000000000000000")

const placeholderAt = len(`{"offset":"`)

// putOffset writes the offset of event seq in epoch to dst[:offsetLen], as
// tether.FormatOffset would (which goes through fmt, too slow for the single
// writer). Both must stay in range (see offsetLen).
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

// formatOffset is putOffset as a string.
func formatOffset(epoch, seq uint64) tether.Offset {
	var b [offsetLen]byte
	putOffset(b[:], epoch, seq)
	return tether.Offset(b[:])
}
