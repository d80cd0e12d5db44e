package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/nest"
)

// readBody reads a request body of at most limit bytes.
//
// Bodies are always JSON. From clients that are not browsers, no
// Content-Type, text/plain and application/x-www-form-urlencoded (what
// curl -d sends) are taken as JSON too. From a browser (fromBrowser), a
// body must be declared application/json: the other two (and none) are
// what a page of another origin may send without a CORS preflight, so
// refusing them keeps such pages out even where crossOrigin cannot tell
// (an old browser that sends neither Sec-Fetch-Site nor Origin is not a
// browser here). Any other type is a mistake worth reporting. A body that
// is not UTF-8, or nested deeper than nest.Max, is bad_request.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	var mt string
	if ct := r.Header.Get("Content-Type"); ct != "" {
		var err error
		mt, _, err = mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "text/plain" && mt != "application/x-www-form-urlencoded") {
			return nil, tether.Errorf(tether.CodeBadRequest, "Content-Type must be application/json")
		}
	}
	b, err := readAll(http.MaxBytesReader(nil, r.Body, limit), min(r.ContentLength, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tether.Errorf(tether.CodeTooLarge, "request body is larger than %d bytes", limit)
	}
	if errors.Is(err, errBodyTimeout) {
		return nil, errBodyTimeout
	}
	if err != nil {
		return nil, tether.Errorf(tether.CodeBadRequest, "request body could not be read")
	}
	if mt != "application/json" && fromBrowser(r) && len(bytes.TrimSpace(b)) > 0 {
		return nil, tether.Errorf(tether.CodeBadRequest, "Content-Type must be application/json: a browser's body is read as JSON only when it says so")
	}
	// JSON is UTF-8 (RFC 8259). Decoding does not check it: the values
	// kept as they came (metadata, state, data, an answer) would carry
	// other bytes into the log, and into every answer that holds them,
	// which strict decoders (Python's json.loads on bytes) then refuse.
	if err := nest.Check(b); err != nil {
		return nil, tether.Errorf(tether.CodeBadRequest, "request body %v", err)
	}
	return b, nil
}

// decodeJSON decodes a JSON object body into v, strictly: unknown fields
// and trailing data are errors. An empty body leaves v as it is when
// optional is set.
func decodeJSON(r *http.Request, limit int64, v any, optional bool) error {
	b, err := readBody(r, limit)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if optional {
			return nil
		}
		return tether.Errorf(tether.CodeBadRequest, "request body is empty; a JSON object is expected")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return tether.Errorf(tether.CodeBadRequest, "request body: %s", tether.JSONError(err))
	}
	if dec.More() {
		return tether.Errorf(tether.CodeBadRequest, "request body: unexpected data after the JSON object")
	}
	return nil
}

// checkObject checks that raw, if set, is a JSON object.
func checkObject(raw json.RawMessage, field string) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	if b[0] != '{' {
		return tether.Errorf(tether.CodeBadRequest, "%s must be a JSON object", field)
	}
	return nil
}

// readAll is io.ReadAll into a buffer of size bytes and one more (to see
// the end without growing), when the size is known: io.ReadAll grows its
// buffer by doubling from 512 bytes, so that a 4 MiB body cost about
// 12 MiB of allocations and was held with up to twice its size.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			// Longer than it said: let io.ReadAll's growth take over.
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}
