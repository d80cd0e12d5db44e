package durablestreams

import (
	"mime"
	"net/http"
	"strings"
)

// Streams hold whatever their writers put in them, and they are served on
// the API's origin, which is also the web page's (whose token is kept in
// localStorage): a stream created as text/html or image/svg+xml and opened
// in a browser must never run there as a document. So every answer under
// Prefix carries a CSP that sandboxes it (a unique origin, no scripts, no
// plugins, no subresources, never framed) and nosniff, and a stream whose
// type is not known to be passive is served as an attachment (a browser
// saves it instead of showing it). The stream's content type itself is
// still what the protocol says (echoed by PUT, HEAD and reads, checked on
// appends): fetch and XHR readers ignore both headers.

// sandboxCSP is the Content-Security-Policy of every answer under Prefix.
const sandboxCSP = "sandbox; default-src 'none'; frame-ancestors 'none'"

// setBrowserHeaders sets the headers every answer carries (PROTOCOL.md
// §10.7, and the sandbox above).
func setBrowserHeaders(hd http.Header) {
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	hd.Set("Content-Security-Policy", sandboxCSP)
}

// setContentType sets an answer's Content-Type to a stream's, and makes
// it an attachment unless the type is passive.
func setContentType(hd http.Header, ct string) {
	hd.Set("Content-Type", ct)
	if !passive(ct) {
		hd.Set("Content-Disposition", "attachment")
	}
}

// passive reports whether a browser shows a media type as inert data
// (text, JSON, raw bytes), never as a document or a script. Anything else,
// known or not (HTML, SVG, XML, JavaScript, PDF, multipart, malformed), is
// an attachment: the list is what is allowed, not what is refused.
func passive(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "text/plain", "text/csv", "text/event-stream", "application/json", "application/octet-stream",
		"application/ndjson", "application/x-ndjson", "application/jsonl", "application/jsonlines":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
