package durablestreams_test

import (
	"context"
	b64 "encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// TestHTTPCatchUpIsOneAnswer: a catch-up GET answers everything up to the
// tail at once, whatever the size of the pages it is read in (1,000 bytes
// here), for JSON streams, byte streams and thread logs; Content-Length is
// exact, and the ETag and caching rules hold.
func TestHTTPCatchUpIsOneAnswer(t *testing.T) {
	s := newServerWith(t, streams.Options{ReadBytes: 1000}, wake.Options{}, durablestreams.Options{})
	s.do("PUT", "j", "", "Content-Type", "application/json")
	for i := range 50 {
		resp, body := s.do("POST", "j", fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 200)), "Content-Type", "application/json")
		s.want(resp, body, 204)
	}
	resp, body := s.do("GET", "j?offset=-1", "")
	s.want(resp, body, 200)
	var msgs []struct{ I int }
	if err := json.Unmarshal([]byte(body), &msgs); err != nil || len(msgs) != 50 || msgs[49].I != 49 {
		t.Fatalf("JSON catch-up: %d messages, %v", len(msgs), err)
	}
	h := resp.Header
	if h.Get("Stream-Up-To-Date") != "true" || h.Get("Cache-Control") != "no-cache" || h.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("JSON catch-up headers: %v (body %d bytes)", h, len(body))
	}
	resp, body = s.do("GET", "j?offset=-1", "", "If-None-Match", h.Get("ETag"))
	s.want(resp, body, 304)
	resp, body = s.do("GET", "j?offset="+h.Get("Stream-Next-Offset"), "")
	if body != "[]" || resp.Header.Get("Stream-Up-To-Date") != "true" || resp.Header.Get("Content-Length") != "2" {
		t.Fatalf("from the tail: %q %v", body, resp.Header)
	}

	s.do("PUT", "b", "", "Content-Type", "application/octet-stream")
	var want strings.Builder
	for i := range 30 {
		chunk := strings.Repeat(string(rune('a'+i%26)), 333)
		want.WriteString(chunk)
		s.do("POST", "b", chunk, "Content-Type", "application/octet-stream")
	}
	resp, body = s.do("GET", "b", "")
	if body != want.String() || resp.Header.Get("Stream-Up-To-Date") != "true" {
		t.Fatalf("byte catch-up: %d of %d bytes, %v", len(body), want.Len(), resp.Header)
	}

	// A thread log, written by the runs engine (here straight to the store).
	now := tether.Now()
	var evs []*tether.Event
	var enc [][]byte
	for i := range 100 {
		ev := &tether.Event{Type: tether.EventCustom, TS: now, RunID: "run_1", Name: "n",
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("y", 100)))}
		b, _ := ev.Encode()
		evs, enc = append(evs, ev), append(enc, b)
	}
	if _, err := s.st.Commit(context.Background(), &store.Batch{ThreadID: "t1", Create: true, Events: evs, Encoded: enc,
		Thread: &tether.Thread{ID: "t1", Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	resp, body = s.do("GET", "threads/t1?offset=-1", "")
	var log []tether.Event
	if err := json.Unmarshal([]byte(body), &log); err != nil || len(log) != 100 || resp.Header.Get("Stream-Up-To-Date") != "true" ||
		string(log[99].Offset) != resp.Header.Get("Stream-Next-Offset") {
		t.Fatalf("thread log: %d events, %v, %v", len(log), err, resp.Header)
	}
}

// TestHTTPCatchUpBound: past the bound (CatchUpBytes, 5,000 bytes here) a
// catch-up ends at a whole append, without Stream-Up-To-Date and cacheable
// (it never changes), and the client reads on from Stream-Next-Offset.
func TestHTTPCatchUpBound(t *testing.T) {
	s := newServerWith(t, streams.Options{ReadBytes: 1000, CatchUpBytes: 5000}, wake.Options{}, durablestreams.Options{})
	s.do("PUT", "j", "", "Content-Type", "application/json")
	var tails []string
	for i := range 30 {
		resp, body := s.do("POST", "j", fmt.Sprintf(`[{"i":%d,"pad":%q},{"i":%d}]`, 2*i, strings.Repeat("x", 580), 2*i+1), "Content-Type", "application/json")
		s.want(resp, body, 204)
		tails = append(tails, resp.Header.Get("Stream-Next-Offset"))
	}
	var got []struct{ I int }
	off, answers := "-1", 0
	for ; answers < 30; answers++ {
		resp, body := s.do("GET", "j?offset="+off, "")
		s.want(resp, body, 200)
		var page []struct{ I int }
		if err := json.Unmarshal([]byte(body), &page); err != nil || len(page)%2 != 0 {
			t.Fatalf("answer %d: %d messages (appends are pairs), %v", answers, len(page), err)
		}
		got = append(got, page...)
		h := resp.Header
		if h.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Fatalf("Content-Length %s, body %d bytes", h.Get("Content-Length"), len(body))
		}
		off = h.Get("Stream-Next-Offset")
		if h.Get("Stream-Up-To-Date") == "true" {
			break
		}
		// Stopped short: at a whole append, within the bound, and immutable.
		if len(body) > 5000+2+len(page) || h.Get("Cache-Control") != "private, max-age=60, stale-while-revalidate=300" {
			t.Fatalf("a bounded answer: %d bytes, %v", len(body), h)
		}
		if tails[len(got)/2-1] != off {
			t.Fatalf("answer %d ends at %s, not at the end of append %d", answers, off, len(got)/2)
		}
		resp2, body2 := s.do("GET", "j?offset="+resp.Request.URL.Query().Get("offset"), "", "If-None-Match", h.Get("ETag"))
		s.want(resp2, body2, 304)
	}
	if len(got) != 60 || answers < 3 || off != tails[29] {
		t.Fatalf("%d messages in %d answers, ending at %s", len(got), answers+1, off)
	}
	for i, m := range got {
		if m.I != i {
			t.Fatalf("message %d is %d", i, m.I)
		}
	}
}

// TestHTTPCatchUpBoundAtWholeAppends: a large append is stored in pieces
// (ChunkBytes, 4 bytes here); past the bound (10 bytes) a catch-up ends at
// the last whole append, never between two pieces of one, and an append
// larger than the bound is returned whole. It ended at the last piece
// within the bound: a text stream's answer then ended inside a character
// ("€", 3 bytes, cut after its first), so each of two answers decoded
// with a replacement character, and its Stream-Next-Offset named a
// position inside the append, where a fork took half of it.
func TestHTTPCatchUpBoundAtWholeAppends(t *testing.T) {
	s := newServerWith(t, streams.Options{ChunkBytes: 4, CatchUpBytes: 10}, wake.Options{}, durablestreams.Options{})
	s.do("PUT", "t", "", "Content-Type", "text/plain; charset=utf-8")
	appends := []string{"0123", "€€€€", "xy", "ab"}
	var tails []string
	for _, a := range appends {
		resp, body := s.do("POST", "t", a, "Content-Type", "text/plain; charset=utf-8")
		s.want(resp, body, 204)
		tails = append(tails, resp.Header.Get("Stream-Next-Offset"))
	}
	// read reads a stream to its tail, an answer at a time.
	read := func(path string) (bodies, ends []string) {
		for off := "-1"; len(bodies) < 10; {
			resp, body := s.do("GET", path+"?offset="+off, "")
			s.want(resp, body, 200)
			bodies = append(bodies, body)
			off = resp.Header.Get("Stream-Next-Offset")
			ends = append(ends, off)
			if resp.Header.Get("Stream-Up-To-Date") == "true" {
				break
			}
		}
		return bodies, ends
	}
	bodies, ends := read("t")
	want := []string{"0123", "€€€€", "xyab"}
	if strings.Join(bodies, "|") != strings.Join(want, "|") || strings.Join(ends, " ") != strings.Join([]string{tails[0], tails[1], tails[3]}, " ") {
		t.Fatalf("answers %q ending at %v; want %q ending at the appends' ends %v", bodies, ends, want, tails)
	}
	// A fork at every offset handed out holds whole appends.
	for i, off := range ends {
		f := fmt.Sprintf("f%d", i)
		resp, body := s.do("PUT", f, "", "Content-Type", "text/plain; charset=utf-8", "Stream-Forked-From", durablestreams.Prefix+"t", "Stream-Fork-Offset", off)
		s.want(resp, body, 201)
		if got, _ := read(f); strings.Join(got, "") != strings.Join(want[:i+1], "") {
			t.Fatalf("fork at %s: %q", off, got)
		}
	}
}

// TestHTTPLiveReadsAtWholeAppends: a long poll or an SSE response sends
// what is ready in pages (ReadBytes, 10 bytes here) that end at whole
// appends, never between the pieces (ChunkBytes, 4) a large append is
// stored in; an append larger than a page is sent whole. Pages were cut
// between pieces: a text stream's page ended inside a character ("€", 3
// bytes), so a long-poll answer or an SSE data event held half of one,
// which clients decode as a replacement character, and every stream's
// Stream-Next-Offset (or streamNextOffset) named a position inside an
// append, where a fork holds half of it and a reader that stops has half
// a message. Text, JSON and binary (base64 in SSE) streams alike.
func TestHTTPLiveReadsAtWholeAppends(t *testing.T) {
	s := newServerWith(t, streams.Options{ChunkBytes: 4, ReadBytes: 10}, wake.Options{}, durablestreams.Options{})
	for _, tc := range []struct {
		ct      string
		appends []string
		want    string // what the whole stream reads as: its bytes, or its messages joined by commas
	}{
		{"text/plain; charset=utf-8", []string{"0123", "€€€€", "xy", "ab", "€€€€€€€€", "c"}, "0123€€€€xyab€€€€€€€€c"},
		{"application/octet-stream", []string{"0123", "€€€€", "xy", "ab", "€€€€€€€€", "c"}, "0123€€€€xyab€€€€€€€€c"},
		{"application/json", []string{`"a"`, `["bb","cc","dd","ee"]`, `[1,2]`, `["ffff","gggg","hhhh"]`}, `"a","bb","cc","dd","ee",1,2,"ffff","gggg","hhhh"`},
	} {
		path := strings.NewReplacer("/", "-", ";", "", " ", "", "=", "-").Replace(tc.ct)
		resp, body := s.do("PUT", path, "", "Content-Type", tc.ct)
		s.want(resp, body, 201)
		ends := map[string]bool{}
		for _, a := range tc.appends {
			resp, body := s.do("POST", path, a, "Content-Type", tc.ct)
			s.want(resp, body, 204)
			ends[resp.Header.Get("Stream-Next-Offset")] = true
		}
		resp, body = s.do("POST", path, "", "Stream-Closed", "true") // so that reads end
		s.want(resp, body, 204)
		ends[resp.Header.Get("Stream-Next-Offset")] = true
		jsonMode := tc.ct == "application/json"
		// page checks one page of data: it decodes on its own, and ends
		// at the end of an append.
		page := func(how, data, next string) string {
			t.Helper()
			if !ends[next] {
				t.Fatalf("%s %s: a page %q ends at %s, inside an append", tc.ct, how, data, next)
			}
			if jsonMode {
				var msgs []json.RawMessage
				if err := json.Unmarshal([]byte(data), &msgs); err != nil {
					t.Fatalf("%s %s: page %q: %v", tc.ct, how, data, err)
				}
				return strings.TrimSuffix(strings.TrimPrefix(data, "["), "]")
			}
			if strings.HasPrefix(tc.ct, "text/") && !utf8.ValidString(data) {
				t.Fatalf("%s %s: page %q ends inside a character", tc.ct, how, data)
			}
			return data
		}
		join := func(parts []string) string {
			if jsonMode {
				return strings.Join(parts, ",")
			}
			return strings.Join(parts, "")
		}

		// Long polls, from the start to the close.
		var got []string
		for off := "-1"; len(got) < 20; {
			resp, body := s.do("GET", path+"?offset="+off+"&live=long-poll", "")
			if resp.StatusCode == 204 && resp.Header.Get("Stream-Closed") == "true" {
				break
			}
			s.want(resp, body, 200)
			off = resp.Header.Get("Stream-Next-Offset")
			got = append(got, page("long poll", body, off))
		}
		if join(got) != tc.want {
			t.Fatalf("%s long polls: %q, want %s", tc.ct, got, tc.want)
		}

		// SSE, from the start to the close.
		evs, resp := sseEvents(t, s.URL+durablestreams.Prefix+path+"?offset=-1&live=sse", 100)
		base64 := resp.Header.Get("Stream-SSE-Data-Encoding") == "base64"
		got = got[:0]
		for i := 0; i+1 < len(evs); i += 2 {
			if evs[i][0] != "data" || evs[i+1][0] != "control" {
				t.Fatalf("%s SSE events %q", tc.ct, evs)
			}
			data := evs[i][1]
			if base64 {
				b, err := b64.StdEncoding.DecodeString(data)
				if err != nil {
					t.Fatalf("%s SSE data %q: %v", tc.ct, data, err)
				}
				data = string(b)
			}
			var c struct{ StreamNextOffset string }
			if err := json.Unmarshal([]byte(evs[i+1][1]), &c); err != nil {
				t.Fatal(err)
			}
			got = append(got, page("SSE", data, c.StreamNextOffset))
		}
		if join(got) != tc.want {
			t.Fatalf("%s SSE: %q, want %s", tc.ct, got, tc.want)
		}
	}
}
