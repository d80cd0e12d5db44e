package durablestreams_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/api/durablestreams"
)

// distinct returns n bytes in which every aligned 4 bytes hold their own
// index, so that a read that skips, repeats or reorders any part of them
// does not compare equal.
func distinct(n int) []byte {
	b := make([]byte, n+4)
	for i := 0; i < n; i += 4 {
		binary.BigEndian.PutUint32(b[i:], uint32(i/4)^0x9e3779b9)
	}
	return b[:n]
}

// TestForkSubOffsetInLargeAppend: a sub-offset fork of an append larger
// than one stored piece (256 KiB) starts with exactly the source up to
// the fork offset and the first n bytes of that whole append, at any n up
// to its length; past it, 400.
func TestForkSubOffsetInLargeAppend(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	const ct = "application/octet-stream"
	head := "head"
	resp, body := s.do("PUT", "big", head, "Content-Type", ct)
	s.want(resp, body, 201)
	at := resp.Header.Get("Stream-Next-Offset")
	big := distinct(700 << 10)
	resp, body = s.do("POST", "big", string(big), "Content-Type", ct)
	s.want(resp, body, 204)
	resp, body = s.do("POST", "big", "after", "Content-Type", ct)
	s.want(resp, body, 204)

	for _, n := range []int{1, 100 << 10, 256 << 10, 256<<10 + 1, 300 << 10, 600<<10 + 3, 700 << 10} {
		path := "fork-" + strconv.Itoa(n)
		resp, body = s.do("PUT", path, "own", "Content-Type", ct, "Stream-Forked-From", "/v1/stream/big",
			"Stream-Fork-Offset", at, "Stream-Fork-Sub-Offset", strconv.Itoa(n))
		s.want(resp, body, 201)
		resp, body = s.do("POST", path, "+more", "Content-Type", ct)
		s.want(resp, body, 204)
		resp, body = s.do("GET", path+"?offset=-1", "")
		s.want(resp, body, 200)
		if want := head + string(big[:n]) + "own+more"; body != want {
			t.Errorf("fork at sub-offset %d: %d bytes, want %d (first difference at %d)", n, len(body), len(want), firstDiff(body, want))
		}
	}
	// One byte past the append: 400, and nothing created.
	resp, body = s.do("PUT", "fork-past", "", "Content-Type", ct, "Stream-Forked-From", "/v1/stream/big",
		"Stream-Fork-Offset", at, "Stream-Fork-Sub-Offset", strconv.Itoa(700<<10+1))
	s.want(resp, body, 400)
	if !strings.Contains(body, `"bad_request"`) {
		t.Fatalf("past the append: %s", body)
	}
	resp, body = s.do("HEAD", "fork-past", "")
	s.want(resp, body, 404)

	// A fork of a fork, at the same offset, inside the copied part (which
	// is itself stored in pieces).
	resp, body = s.do("PUT", "fork-fork", "", "Content-Type", ct, "Stream-Forked-From", "/v1/stream/fork-"+strconv.Itoa(600<<10+3),
		"Stream-Fork-Offset", at, "Stream-Fork-Sub-Offset", strconv.Itoa(500<<10))
	s.want(resp, body, 201)
	resp, body = s.do("GET", "fork-fork?offset=-1", "")
	s.want(resp, body, 200)
	if want := head + string(big[:500<<10]); body != want {
		t.Errorf("fork of a fork: %d bytes, want %d (first difference at %d)", len(body), len(want), firstDiff(body, want))
	}
}

// TestJSONForkSubOffsetInLargeAppend: the same for a JSON stream, whose
// sub-offset counts the messages of the append.
func TestJSONForkSubOffsetInLargeAppend(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	const ct = "application/json"
	resp, body := s.do("PUT", "j", `{"first":true}`, "Content-Type", ct)
	s.want(resp, body, 201)
	at := resp.Header.Get("Stream-Next-Offset")
	// 3000 messages of about 250 bytes: about 730 KiB in one append.
	msgs := make([]string, 3000)
	pad := strings.Repeat("x", 230)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"i":%d,"p":"%s"}`, i, pad)
	}
	resp, body = s.do("POST", "j", "["+strings.Join(msgs, ",")+"]", "Content-Type", ct)
	s.want(resp, body, 204)
	resp, body = s.do("POST", "j", `{"after":true}`, "Content-Type", ct)
	s.want(resp, body, 204)

	for _, n := range []int{1, 500, 1100, 2999, 3000} {
		path := "jfork-" + strconv.Itoa(n)
		resp, body = s.do("PUT", path, `{"own":true}`, "Content-Type", ct, "Stream-Forked-From", "/v1/stream/j",
			"Stream-Fork-Offset", at, "Stream-Fork-Sub-Offset", strconv.Itoa(n))
		s.want(resp, body, 201)
		resp, body = s.do("GET", path+"?offset=-1", "")
		s.want(resp, body, 200)
		var got []json.RawMessage
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("fork at sub-offset %d: %v", n, err)
		}
		want := append(append([]string{`{"first":true}`}, msgs[:n]...), `{"own":true}`)
		if len(got) != len(want) {
			t.Errorf("fork at sub-offset %d: %d messages, want %d", n, len(got), len(want))
			continue
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Errorf("fork at sub-offset %d: message %d is %.40s, want %.40s", n, i, got[i], want[i])
				break
			}
		}
	}
	resp, body = s.do("PUT", "jfork-past", "", "Content-Type", ct, "Stream-Forked-From", "/v1/stream/j",
		"Stream-Fork-Offset", at, "Stream-Fork-Sub-Offset", "3001")
	s.want(resp, body, 400)
}

// firstDiff returns the index of the first byte where a and b differ.
func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestForkSourceByItsURL: Stream-Forked-From names the source as its URL
// does, percent-encoded (header values are ASCII; Location hands the URL
// out so), and the request path is decoded before it names a stream: the
// header must be decoded too. It was not, so a source whose name holds a
// space, a "%" or any non-ASCII letter could not be forked by its URL
// (404), and one whose name has none of these still can, as can one named
// by an unescaped value that is not a valid escape.
func TestForkSourceByItsURL(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	const ct = "text/plain"
	resp, body := s.do("PUT", "notes/Jos%C3%A9%201%2525", "source", "Content-Type", ct)
	s.want(resp, body, 201)
	loc := resp.Header.Get("Location")
	if loc != "/v1/stream/notes/Jos%C3%A9%201%2525" {
		t.Fatalf("Location %q", loc)
	}
	for i, from := range []string{loc, s.URL + loc, s.URL + loc + "?offset=-1"} {
		path := fmt.Sprintf("fork-%d", i)
		resp, body = s.do("PUT", path, "", "Content-Type", ct, "Stream-Forked-From", from)
		s.want(resp, body, 201)
		resp, body = s.do("GET", path, "")
		s.want(resp, body, 200)
		if body != "source" {
			t.Fatalf("fork of %s: %q", from, body)
		}
	}
	resp, body = s.do("PUT", "100%25", "literal", "Content-Type", ct)
	s.want(resp, body, 201)
	resp, body = s.do("PUT", "fork-literal", "", "Content-Type", ct, "Stream-Forked-From", "/v1/stream/100%")
	s.want(resp, body, 201)
	resp, body = s.do("GET", "fork-literal", "")
	if body != "literal" {
		t.Fatalf("fork of a literal %%: %q", body)
	}
	// Decoded, the source is held to the rules of any path.
	resp, body = s.do("PUT", "fork-dots", "", "Content-Type", ct, "Stream-Forked-From", "/v1/stream/notes/%2E%2E/x")
	s.want(resp, body, 400)
}

// TestForksOfEachOtherAtOnce: a PUT forking b into a and one forking a
// into b, at once, each held its own stream's write lock and waited for
// the other's: both hung for good, and so did every later write to either
// stream. They are answered (one of them 409: a stream exists with another
// configuration), and the streams stay writable.
func TestForksOfEachOtherAtOnce(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	for _, p := range []string{"cycle/a", "cycle/b"} {
		resp, body := s.do("PUT", p, "", "Content-Type", "text/plain")
		s.want(resp, body, 201)
	}
	// A request that waits on the other for good is cut here, so that the
	// test reports it rather than hang.
	client := &http.Client{Timeout: 20 * time.Second}
	put := func(path, from string) error {
		req, _ := http.NewRequest("PUT", s.URL+durablestreams.Prefix+path, nil)
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Stream-Forked-From", durablestreams.Prefix+from)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 409 {
			return fmt.Errorf("PUT %s forked from %s: %d, want 409", path, from, resp.StatusCode)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := range 300 {
				var err error
				if (w+i)%2 == 0 {
					err = put("cycle/a", "cycle/b")
				} else {
					err = put("cycle/b", "cycle/a")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	resp, body := s.do("POST", "cycle/a", "still writable", "Content-Type", "text/plain")
	s.want(resp, body, 204)
}
