package streams

import (
	"encoding/json"
	"mime"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
)

// meta is a stream's configuration and state, kept in its thread row's
// metadata and written in the same commit as the events that change it, so
// that it always agrees with the log.
type meta struct {
	// ContentType is the stream's content type as created.
	ContentType string `json:"content_type"`
	// TTL is the sliding time to live in seconds, if any.
	TTL *int64 `json:"ttl,omitempty"`
	// ExpiresAt is the absolute expiry, if any (Unix milliseconds).
	ExpiresAt *int64 `json:"expires_at,omitempty"`
	// Closed says no more appends are accepted (its ds.close event is in
	// the log).
	Closed bool `json:"closed,omitempty"`
	// ClosedAtCreate says the stream was created closed (part of its
	// configuration for idempotent creates).
	ClosedAtCreate bool `json:"closed_at_create,omitempty"`
	// Seq is the last Stream-Seq accepted.
	Seq string `json:"seq,omitempty"`
	// ForkedFrom is the thread ID of the stream this one was forked from;
	// ForkOffset the position it inherits up to (empty for the start) and
	// ForkSub the sub-offset asked for (bytes or messages of the append
	// after ForkOffset, copied into this stream's own log).
	ForkedFrom string        `json:"forked_from,omitempty"`
	ForkOffset tether.Offset `json:"fork_offset,omitempty"`
	ForkSub    int64         `json:"fork_sub,omitempty"`
	// Deleted marks a stream deleted while forks still read its log: it
	// answers 410 until the last fork is gone, then it is removed.
	Deleted bool `json:"deleted,omitempty"`
	// Inc names this incarnation of the path (random, made at creation),
	// so that a node can tell a stream from one deleted and created again
	// at the same path.
	Inc string `json:"inc,omitempty"`
}

func decodeMeta(raw json.RawMessage) (meta, error) {
	var m meta
	if len(raw) == 0 {
		return m, nil
	}
	err := json.Unmarshal(raw, &m)
	return m, err
}

func (m *meta) encode() json.RawMessage {
	b, _ := json.Marshal(m) // cannot fail: plain fields
	return b
}

func (m *meta) expiresAt() (time.Time, bool) {
	if m.ExpiresAt == nil {
		return time.Time{}, false
	}
	return time.UnixMilli(*m.ExpiresAt).UTC(), true
}

// Content types.

// DefaultContentType is the content type of a stream created without one.
const DefaultContentType = "application/octet-stream"

// mediaType returns the lowercased media type of a Content-Type header
// (without parameters), or "" if it is malformed.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return ""
	}
	return strings.ToLower(mt)
}

// IsJSON reports whether a content type selects JSON mode: message
// boundaries are kept and reads return a JSON array.
func IsJSON(ct string) bool { return mediaType(ct) == "application/json" }

// IsText reports whether a stream of this content type can be sent as text
// in SSE (text/* and application/json); other streams are sent as base64.
func IsText(ct string) bool {
	mt := mediaType(ct)
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}

func sameMediaType(a, b string) bool { return mediaType(a) == mediaType(b) }
