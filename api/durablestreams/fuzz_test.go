package durablestreams_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/streams"
)

// fuzzServer is the handler over a real store for a whole fuzz run, with
// a JSON source stream of three appends ([1,2], [3], [4,5,6]) to read and
// fork.
type fuzzServer struct {
	url string
	n   int
	// pos are the source's positions: its start and the tail after each
	// append; msgs the messages each append added.
	pos  []string
	msgs [][]json.RawMessage
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	st, err := sqlitestore.Open(filepath.Join(tb.TempDir(), "tether.db"), sqlitestore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	h := hub.New(st.ReadPage, hub.Options{})
	st.SetNotify(func(c *store.Committed) { h.Publish(c.ThreadID, c.Before, c.Records) })
	svc := streams.New(st, h, streams.Options{})
	if err := svc.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(durablestreams.Prefix, durablestreams.New(svc, durablestreams.Options{LongPollTimeout: 20 * time.Millisecond}))
	hs := httptest.NewServer(mux)
	tb.Cleanup(func() {
		hs.Close()
		svc.Close()
		h.Close()
		st.Close()
	})
	s := &fuzzServer{url: hs.URL + durablestreams.Prefix}
	r := s.do(tb, "PUT", "src", nil, "Content-Type", "application/json")
	if r.status != 201 {
		tb.Fatalf("create source: %d %s", r.status, r.body)
	}
	s.pos = []string{r.header.Get("Stream-Next-Offset")}
	for _, b := range []string{`[1,2]`, `[3]`, `[4,5,6]`} {
		r := s.do(tb, "POST", "src", []byte(b), "Content-Type", "application/json")
		if r.status != 204 {
			tb.Fatalf("append source: %d %s", r.status, r.body)
		}
		s.pos = append(s.pos, r.header.Get("Stream-Next-Offset"))
		var m []json.RawMessage
		_ = json.Unmarshal([]byte(b), &m)
		s.msgs = append(s.msgs, m)
	}
	return s
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to a stream path; hdr holds name, value pairs, and a
// value "\x00" is not sent (an empty one is).
func (s *fuzzServer) do(t testing.TB, method, path string, body []byte, hdr ...string) *answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "\x00" {
			req.Header[http.CanonicalHeaderKey(hdr[i])] = []string{hdr[i+1]}
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := &answer{res.StatusCode, res.Header, b}
	checkAnswer(t, method+" "+path, a)
	return a
}

var codeFor = map[string]int{"bad_request": 400, "not_found": 404, "gone": 410, "conflict": 409, "forbidden": 403,
	"method_not_allowed": 405, "too_large": 413, "unavailable": 503}

// checkAnswer checks that no answer is a server fault and that errors
// have Tether's error body with a code that matches the status.
func checkAnswer(t testing.TB, what string, a *answer) {
	t.Helper()
	if a.status >= 500 {
		t.Fatalf("%s: %d %s", what, a.status, a.body)
	}
	if a.status < 400 || strings.HasPrefix(what, "HEAD ") {
		return // HEAD answers have no body
	}
	var b struct {
		Error *struct{ Code, Message string }
	}
	if err := json.Unmarshal(a.body, &b); err != nil || b.Error == nil || codeFor[b.Error.Code] != a.status || b.Error.Message == "" {
		t.Fatalf("%s: %d with body %q", what, a.status, a.body)
	}
}

// readAll reads a stream from a position to its tail.
func (s *fuzzServer) readAll(t testing.TB, path, from string) []byte {
	t.Helper()
	var out []byte
	for range 100 {
		r := s.do(t, "GET", path+"?offset="+url.QueryEscape(from), nil)
		if r.status != 200 {
			t.Fatalf("read %s from %s: %d %s", path, from, r.status, r.body)
		}
		out = append(out, r.body...)
		if r.header.Get("Stream-Up-To-Date") == "true" {
			return out
		}
		from = r.header.Get("Stream-Next-Offset")
	}
	t.Fatalf("read %s: no end", path)
	return nil
}

// messages splits what a JSON stream's reads returned (one array per
// answer, concatenated) into messages.
func messages(t testing.TB, b []byte) []string {
	t.Helper()
	var out []string
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var arr []json.RawMessage
		if err := dec.Decode(&arr); err != nil {
			t.Fatalf("a JSON stream read %q: %v", b, err)
		}
		for _, m := range arr {
			out = append(out, compact(m))
		}
	}
	return out
}

// bodyMessages is what a JSON-mode append body adds: its value, or each
// element of an array.
func bodyMessages(b []byte) []string {
	var arr []json.RawMessage
	if json.Unmarshal(b, &arr) == nil {
		out := []string{}
		for _, m := range arr {
			out = append(out, compact(m))
		}
		return out
	}
	return []string{compact(b)}
}

// compact is a canonical form of a JSON value: the server re-encodes a
// JSON stream's messages (HTML-escaping <, > and &, as encoding/json
// does), so messages are compared as values, not bytes.
func compact(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "!" + string(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "!" + string(b)
	}
	return string(out)
}

func sendable(t *testing.T, values ...string) {
	for _, s := range values {
		if s == "\x00" {
			continue
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
				t.Skip("not a valid header value")
			}
		}
		if strings.TrimSpace(s) != s {
			t.Skip("header values are trimmed in transit")
		}
	}
}

var (
	decimal = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})$`)
	allZero = regexp.MustCompile(`^0+_0+$`)
)

// FuzzStreamCreate fuzzes PUT: Content-Type, Stream-TTL,
// Stream-Expires-At, Stream-Closed, the fork headers and the body.
// Whatever is sent: no server fault, errors in Tether's body; a plain
// create with a well-formed TTL and a known type succeeds; a created
// stream reports the type, TTL, expiry and closure it was created with,
// and reads back as its body (a fork: as the source up to the fork point,
// then its body).
func FuzzStreamCreate(f *testing.F) {
	s := newFuzzServer(f)
	type seed struct{ ct, ttl, exp, closed, from, off, sub, body string }
	for _, c := range []seed{
		{"application/json", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", `[{"a":1},2]`},
		{"text/plain; charset=utf-8", "60", "\x00", "true", "\x00", "\x00", "\x00", "hello"},
		{"\x00", "\x00", "2030-01-02T03:04:05.123456Z", "\x00", "\x00", "\x00", "\x00", ""},
		{"application/json", "0", "2030-01-02T03:04:05Z", "\x00", "\x00", "\x00", "\x00", `{}`},
		{"application/json", "007", "\x00", "\x00", "\x00", "\x00", "\x00", `[]`},
		{"application/json", "\x00", "\x00", "\x00", "/v1/stream/src", "\x00", "\x00", `[7]`},
		{"application/json", "\x00", "\x00", "\x00", "/v1/stream/src", "POS1", "1", ``},
		{"\x00", "\x00", "\x00", "\x00", "/v1/stream/src", "POS2", "2", `8`},
		{"\x00", "\x00", "\x00", "\x00", "/v1/stream/nope", "\x00", "\x00", ``},
		{"application/json", "\x00", "\x00", "\x00", "\x00", "POS1", "\x00", `[1`},
		{"image/svg+xml", "99999999999999999999", "\x00", "false", "\x00", "\x00", "-1", `<svg/>`},
	} {
		f.Add(c.ct, c.ttl, c.exp, c.closed, c.from, c.off, c.sub, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, ct, ttl, exp, closed, from, off, sub string, body []byte) {
		sendable(t, ct, ttl, exp, closed, from, off, sub)
		for i, p := range s.pos {
			off = strings.ReplaceAll(off, fmt.Sprintf("POS%d", i), p)
		}
		s.n++
		path := fmt.Sprintf("fz/c%d", s.n)
		r := s.do(t, "PUT", path, body, "Content-Type", ct, "Stream-TTL", ttl, "Stream-Expires-At", exp,
			"Stream-Closed", closed, "Stream-Forked-From", from, "Stream-Fork-Offset", off, "Stream-Fork-Sub-Offset", sub)
		// An empty fork header counts as absent.
		forked := from != "\x00" && from != ""
		if off == "" {
			off = "\x00"
		}
		mt, _, mterr := mime.ParseMediaType(ct)
		plain := !forked && off == "\x00" && sub == "\x00" && exp == "\x00" && (ttl == "\x00" || decimal.MatchString(ttl)) &&
			(ct == "\x00" || mterr == nil && (mt == "application/octet-stream" || mt == "text/plain"))
		if r.status != 201 {
			if r.status == 200 || plain {
				t.Fatalf("create %s: %d %s", path, r.status, r.body)
			}
			if h := s.do(t, "HEAD", path, nil); h.status != 404 {
				t.Fatalf("a refused create (%d) left %s: %d", r.status, path, h.status)
			}
			return
		}
		h := s.do(t, "HEAD", path, nil)
		if h.status == 404 && expiresSoon(ttl, exp) {
			return // created with a TTL of seconds, or an expiry now or past: gone already
		}
		if h.status != 200 {
			t.Fatalf("HEAD of a created stream: %d", h.status)
		}
		gotMT, _, _ := mime.ParseMediaType(h.header.Get("Content-Type"))
		wantMT := mt
		switch {
		case forked:
			wantMT = "application/json"
		case ct == "\x00" || ct == "":
			wantMT = "application/octet-stream"
		}
		if !strings.EqualFold(gotMT, wantMT) {
			t.Fatalf("created as %q, HEAD says %q", ct, h.header.Get("Content-Type"))
		}
		if ttl != "\x00" && h.header.Get("Stream-TTL") != ttl {
			t.Fatalf("Stream-TTL %q, HEAD says %q", ttl, h.header.Get("Stream-TTL"))
		}
		if exp != "\x00" {
			want, _ := time.Parse(time.RFC3339Nano, exp)
			got, err := time.Parse(time.RFC3339Nano, h.header.Get("Stream-Expires-At"))
			if err != nil || got.Sub(want).Abs() >= time.Millisecond {
				t.Fatalf("Stream-Expires-At %q, HEAD says %q", exp, h.header.Get("Stream-Expires-At"))
			}
		}
		if (h.header.Get("Stream-Closed") == "true") != (closed == "true" && !forked) {
			t.Fatalf("Stream-Closed %q, HEAD says %q", closed, h.header.Get("Stream-Closed"))
		}
		data := s.readAll(t, path, "-1")
		if !forked && !strings.EqualFold(wantMT, "application/json") {
			if !bytes.Equal(data, body) {
				t.Fatalf("created with %q, reads %q", body, data)
			}
			return
		}
		var want []string
		if forked {
			cut := len(s.pos) - 1 // the source's tail
			switch {
			case allZero.MatchString(off):
				cut = 0 // the start of any stream (§8)
			case off != "\x00":
				cut = indexOf(s.pos, off)
				if cut < 0 {
					t.Fatalf("forked at %q, not a position of the source", off)
				}
			}
			for _, m := range s.msgs[:cut] {
				for _, x := range m {
					want = append(want, compact(x))
				}
			}
			if n, err := strconv.Atoi(sub); err == nil && n > 0 {
				if cut >= len(s.msgs) || n > len(s.msgs[cut]) {
					t.Fatalf("a sub-offset %d past the append after %q was accepted", n, off)
				}
				for _, x := range s.msgs[cut][:n] {
					want = append(want, compact(x))
				}
			}
		}
		if len(body) > 0 && !json.Valid(body) {
			t.Fatalf("a JSON stream was created with %q, which is not JSON", body)
		}
		if len(bytes.TrimSpace(body)) > 0 {
			want = append(want, bodyMessages(body)...)
		}
		if got := messages(t, data); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("reads [%s], want [%s]", strings.Join(got, ","), strings.Join(want, ","))
		}
	})
}

// expiresSoon reports whether a stream created with these headers may
// have expired by the time it is read back.
func expiresSoon(ttl, exp string) bool {
	if n, err := strconv.ParseInt(ttl, 10, 64); err == nil && n < 10 {
		return true
	}
	at, err := time.Parse(time.RFC3339Nano, exp)
	return err == nil && time.Until(at) < 10*time.Second
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// FuzzStreamAppend fuzzes POST on a new stream: Content-Type,
// Stream-Closed, the producer headers, Stream-Seq and the body. Whatever
// is sent: no server fault, errors in Tether's body; an append that is
// refused leaves the stream as it was; one that is accepted reads back
// exactly (bytes, or JSON messages one level flattened), closes the
// stream if it said so, and its retry by the same producer is a 204 that
// adds nothing.
func FuzzStreamAppend(f *testing.F) {
	s := newFuzzServer(f)
	for _, json := range []bool{false, true} {
		for _, c := range [][6]string{
			{"application/json", "\x00", "\x00", "\x00", "\x00", "\x00"},
			{"application/json; charset=utf-8", "true", "p1", "0", "0", "a"},
			{"APPLICATION/JSON", "\x00", "p1", "1", "0", "\x00"},
			{"application/octet-stream", "\x00", "p1", "0", "00", "b"},
			{"text/plain", "false", "", "0", "9007199254740992", "\x00"},
			{"\x00", "true", "\x00", "\x00", "\x00", "\x00"},
		} {
			for _, body := range []string{`[1,[2],{"a":3}]`, `"x"`, `[]`, ``, `[1,`, "\xff\x00"} {
				f.Add(json, c[0], c[1], c[2], c[3], c[4], c[5], []byte(body))
			}
		}
	}
	f.Fuzz(func(t *testing.T, jsonMode bool, ct, closed, pid, epoch, seq, streamSeq string, body []byte) {
		sendable(t, ct, closed, pid, epoch, seq, streamSeq)
		s.n++
		path := fmt.Sprintf("fz/a%d", s.n)
		streamType := "application/octet-stream"
		if jsonMode {
			streamType = "application/json"
		}
		c := s.do(t, "PUT", path, nil, "Content-Type", streamType)
		if c.status != 201 {
			t.Fatalf("create: %d %s", c.status, c.body)
		}
		tail := c.header.Get("Stream-Next-Offset")
		hdr := []string{"Content-Type", ct, "Stream-Closed", closed, "Producer-Id", pid, "Producer-Epoch", epoch,
			"Producer-Seq", seq, "Stream-Seq", streamSeq}
		r := s.do(t, "POST", path, body, hdr...)
		h := s.do(t, "HEAD", path, nil)
		if r.status >= 300 {
			if h.header.Get("Stream-Next-Offset") != tail || h.header.Get("Stream-Closed") != "" {
				t.Fatalf("a refused append (%d %s) changed the stream", r.status, r.body)
			}
			return
		}
		if r.status == 204 && pid != "\x00" && len(body) > 0 {
			t.Fatalf("a first append of producer %q answered 204", pid)
		}
		if (h.header.Get("Stream-Closed") == "true") != (closed == "true") {
			t.Fatalf("Stream-Closed %q, HEAD says %q", closed, h.header.Get("Stream-Closed"))
		}
		data := s.readAll(t, path, tail)
		if jsonMode {
			if len(body) > 0 && !json.Valid(body) {
				t.Fatalf("a JSON stream took %q, which is not JSON", body)
			}
			var want []string
			if len(body) > 0 {
				want = bodyMessages(body)
			}
			if got := messages(t, data); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("appended %q, reads [%s]", body, strings.Join(got, ","))
			}
		} else if !bytes.Equal(data, body) {
			t.Fatalf("appended %q, reads %q", body, data)
		}
		if pid != "\x00" && len(body) > 0 {
			again := s.do(t, "POST", path, body, hdr...)
			if again.status != 204 || s.do(t, "HEAD", path, nil).header.Get("Stream-Next-Offset") != h.header.Get("Stream-Next-Offset") {
				t.Fatalf("a retry of an accepted append: %d %s", again.status, again.body)
			}
		}
	})
}

// FuzzStreamRead fuzzes the query of reads: offset (given once, twice or
// not at all), live and cursor, on the source stream. Whatever is asked:
// no server fault, errors in Tether's body; a catch-up from a position
// answers exactly the messages after it, and every Stream-Next-Offset is
// a position of the stream.
func FuzzStreamRead(f *testing.F) {
	s := newFuzzServer(f)
	for _, o := range []string{"-1", "now", "POS0", "POS1", "POS3", "0000000000_0000000000000000",
		"0000000000000000_0000000000000000", "1700000000_0000000000000001", "x", "1_2", "-2", "9999999999_9999999999999999"} {
		f.Add(o, "", "", false)
		f.Add(o, "long-poll", "123", false)
		f.Add(o, "", "", true)
	}
	f.Add("", "sse", "", false)
	f.Fuzz(func(t *testing.T, offset, live, cursor string, twice bool) {
		if live == "sse" {
			t.Skip("SSE reads stay open; their framing is FuzzWriteData's")
		}
		for i, p := range s.pos {
			offset = strings.ReplaceAll(offset, fmt.Sprintf("POS%d", i), p)
		}
		q := url.Values{}
		if offset != "" {
			q.Add("offset", offset)
			if twice {
				q.Add("offset", offset)
			}
		}
		if live != "" {
			q.Set("live", live)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := s.do(t, "GET", "src?"+q.Encode(), nil)
		if r.status >= 300 {
			if r.status != 304 && indexOf(s.pos, offset) >= 0 && !twice && (live == "" || live == "long-poll") {
				t.Fatalf("a read from position %q: %d %s", offset, r.status, r.body)
			}
			return
		}
		next := r.header.Get("Stream-Next-Offset")
		if indexOf(s.pos, next) < 0 {
			t.Fatalf("Stream-Next-Offset %q is not a position", next)
		}
		if _, _, err := tether.ParseOffset(tether.Offset(next)); err != nil {
			t.Fatalf("Stream-Next-Offset %q: %v", next, err)
		}
		if r.status == 204 {
			return
		}
		from := indexOf(s.pos, offset)
		switch {
		case offset == "" || offset == "-1" || allZero.MatchString(offset):
			from = 0 // an all-zero offset of any width is the start (§8)
		case offset == "now":
			from = len(s.pos) - 1
		}
		if from < 0 {
			t.Fatalf("a read from %q, not a position, answered %d %q", offset, r.status, r.body)
		}
		var want []string
		for _, m := range s.msgs[from:] {
			for _, x := range m {
				want = append(want, compact(x))
			}
		}
		if got := messages(t, r.body); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("read from %q: [%s], want [%s]", offset, strings.Join(got, ","), strings.Join(want, ","))
		}
	})
}
