package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// dsAck is an append the server acknowledged, and the offset it gave.
type dsAck struct {
	msg    dsMsg
	offset string
}

type dsMsg struct {
	W int `json:"w"`
	I int `json:"i"`
}

// dsAppend appends one JSON message to a Durable Stream, as producer
// "w<w>" (epoch 0, seq i) if producer is set. It returns the status and the
// Stream-Next-Offset.
func (s *server) dsAppend(ctx context.Context, path string, m dsMsg, producer bool) (int, string, error) {
	body, _ := json.Marshal(m)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/stream/"+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if producer {
		req.Header.Set("Producer-Id", "w"+strconv.Itoa(m.W))
		req.Header.Set("Producer-Epoch", "0")
		req.Header.Set("Producer-Seq", strconv.Itoa(m.I))
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Stream-Next-Offset"), nil
}

// dsRead reads a JSON Durable Stream from offset to its tail.
func (s *server) dsRead(t *testing.T, path, offset string) ([]dsMsg, string) {
	t.Helper()
	var all []dsMsg
	for range 1000 {
		resp, err := s.hc.Get(s.URL + "/v1/stream/" + path + "?offset=" + offset)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("read %s from %s: %d %s", path, offset, resp.StatusCode, b)
		}
		var page []dsMsg
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatalf("read %s: %v: %s", path, err, b)
		}
		all = append(all, page...)
		offset = resp.Header.Get("Stream-Next-Offset")
		if resp.Header.Get("Stream-Up-To-Date") == "true" {
			return all, offset
		}
	}
	t.Fatal("the stream does not end")
	return nil, ""
}

// TestKill9DuringStreamAppends kills the server with SIGKILL in the middle
// of a burst of appends to a Durable Stream (writers with idempotent
// producers, and writers without), starts it again, and checks that every
// acknowledged append is in the stream exactly once, in the order of its
// acknowledgement, at the offset it was given; that appends in flight at
// the kill are there at most once; and that producers retrying after the
// restart are deduplicated (their state survived with the data).
func TestKill9DuringStreamAppends(t *testing.T) {
	s := start(t, "")
	const path = "crash/burst"
	s.mustCall(http.MethodPut, "/v1/stream/"+path, nil, http.StatusCreated, nil, "Content-Type", "application/json")

	const writers = 6 // 0..3 with producers, 4..5 without
	producer := func(w int) bool { return w < 4 }
	var (
		mu       sync.Mutex
		acks     []dsAck
		inFlight = make(map[int]int) // writer → the append that got no answer
		next     = make(map[int]int) // writer → the next i to append
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				status, off, err := s.dsAppend(ctx, path, dsMsg{W: w, I: i}, producer(w))
				mu.Lock()
				if err != nil {
					inFlight[w], next[w] = i, i
					mu.Unlock()
					return
				}
				if status != http.StatusOK && status != http.StatusNoContent {
					mu.Unlock()
					t.Errorf("writer %d append %d: status %d", w, i, status)
					return
				}
				acks = append(acks, dsAck{msg: dsMsg{W: w, I: i}, offset: off})
				mu.Unlock()
			}
		}()
	}
	eventually(t, 30*time.Second, "600 acknowledged appends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 600
	})
	s.kill9()
	wg.Wait()
	if t.Failed() {
		return
	}
	s.restart()

	got, _ := s.dsRead(t, path, "-1")
	pos := make(map[dsMsg]int)
	for k, m := range got {
		if _, dup := pos[m]; dup {
			t.Fatalf("append %+v is in the stream twice", m)
		}
		pos[m] = k
	}
	// Concurrent appends may be answered in another order than they were
	// committed; their offsets say the order of the stream.
	slices.SortFunc(acks, func(a, b dsAck) int { return strings.Compare(a.offset, b.offset) })
	last := -1
	for j, a := range acks {
		k, ok := pos[a.msg]
		if !ok {
			t.Fatalf("acknowledged append %+v (offset %s) is missing after the restart", a.msg, a.offset)
		}
		if k <= last || j > 0 && a.offset == acks[j-1].offset {
			t.Fatalf("acknowledged append %+v (offset %s) is at %d, not after the append with the offset before it (at %d)", a.msg, a.offset, k, last)
		}
		last = k
	}
	// Each acknowledged offset is the position right after its append.
	for j := 0; j < len(acks); j += 25 {
		a := acks[j]
		rest, _ := s.dsRead(t, path, a.offset)
		if want := got[pos[a.msg]+1:]; fmt.Sprint(rest) != fmt.Sprint(want) {
			t.Fatalf("reading from the offset of %+v gives %d appends, want the %d after it", a.msg, len(rest), len(want))
		}
	}
	// Nothing but what was sent: per writer, 0..n without holes, except
	// a plain writer's unanswered append, which may be missing.
	for w := range writers {
		n := 0
		for _, m := range got {
			if m.W == w {
				if m.I != n {
					t.Fatalf("writer %d: append %d follows %d", w, m.I, n-1)
				}
				n++
			}
		}
		if n > next[w]+1 {
			t.Fatalf("writer %d: %d appends in the stream, but only %d were sent", w, n, next[w]+1)
		}
	}

	// Producers retry what got no answer: a duplicate if it was
	// committed, appended if not; exactly once either way.
	for w := range writers {
		if !producer(w) {
			continue
		}
		status, _, err := s.dsAppend(t.Context(), path, dsMsg{W: w, I: inFlight[w]}, true)
		if err != nil {
			t.Fatal(err)
		}
		_, had := pos[dsMsg{W: w, I: inFlight[w]}]
		if want := map[bool]int{true: http.StatusNoContent, false: http.StatusOK}[had]; status != want {
			t.Fatalf("writer %d retrying append %d (in the stream: %v): status %d, want %d", w, inFlight[w], had, status, want)
		}
	}
	final, _ := s.dsRead(t, path, "-1")
	seen := make(map[dsMsg]bool)
	for _, m := range final {
		if seen[m] {
			t.Fatalf("append %+v is in the stream twice after the retries", m)
		}
		seen[m] = true
	}
	for w := range writers {
		if producer(w) && !seen[dsMsg{W: w, I: inFlight[w]}] {
			t.Fatalf("writer %d's retried append %d is missing", w, inFlight[w])
		}
	}
}
