package tether

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford base32, lowercase

// NewID returns a new identifier with the given prefix: 48 bits of
// milliseconds and 80 random bits in lowercase base32, so that IDs sort by
// creation time and are URL-safe.
func NewID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	out := make([]byte, 0, len(prefix)+26)
	out = append(out, prefix...)
	// 128 bits → 26 base32 digits, most significant first.
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		shift := uint(i * 5)
		var v uint64
		switch {
		case shift >= 64:
			v = hi >> (shift - 64)
		case shift > 59:
			v = lo>>shift | hi<<(64-shift)
		default:
			v = lo >> shift
		}
		out = append(out, idAlphabet[v&31])
	}
	return string(out)
}

// IDRule says in words what ValidID accepts, for error messages.
const IDRule = `1 to 128 characters of A-Z a-z 0-9 . _ ~ - (not "." or "..")`

// idByte holds the bytes an ID may hold: URL-unreserved characters.
var idByte = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-") {
		t[c] = true
	}
	return t
}()

// ValidID reports whether s can name a thread, run, message, tool call or
// request: 1 to 128 characters of A-Z a-z 0-9 . _ ~ -, but not "." or
// "..", which URL paths treat as relative segments (a thread named ".."
// could be created but never reached at /v1/threads/..). It runs for
// every ID of every request and event, so it is a loop over a table
// rather than a regular expression (~20x faster; FuzzValidID checks the
// two agree).
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idByte[s[i]] {
			return false
		}
	}
	return true
}
