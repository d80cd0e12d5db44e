package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/ssetest"
)

// TestDeleteReadRace races readers of a thread (GET of the thread, its
// events as JSON, its SSE stream) against DELETEs of it and its creation
// again with the same ID, round after round, over HTTP. Each round's
// thread carries its round in its metadata and in the text of its run's
// input, and its run stays pending (active).
//
// What must hold: no read that started after the DELETE of round k
// answered shows round k; no read mixes rounds; the thread created again
// takes a new run (it is not refused with run_active by the deleted one's
// run). Rounds: 200, or TETHER_DELETE_RACE_ROUNDS.
func TestDeleteReadRace(t *testing.T) {
	rounds := 200
	if v := os.Getenv("TETHER_DELETE_RACE_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TETHER_DELETE_RACE_ROUNDS=%q", v)
		}
		rounds = n
	}
	const readers = 6
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	v := newEnvEngine(t, api.Options{Logger: quiet}, engine.Options{Logger: quiet})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * readers}}
	defer client.CloseIdleConnections()

	var (
		mu          sync.Mutex
		deletedAt   = make([]time.Time, rounds) // when the DELETE of round k answered
		seen        []observation
		problems    []string
		stop        atomic.Bool
		wg          sync.WaitGroup
		reads, hits atomic.Int64
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for r := range readers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				start := time.Now()
				rounds, err := readRace(client, v.url, (r+i)%3)
				reads.Add(1)
				if err != nil {
					problem("%v", err)
					continue
				}
				if len(rounds) == 0 {
					continue
				}
				hits.Add(1)
				for _, k := range rounds[1:] {
					if k != rounds[0] {
						problem("a read mixes rounds %v", rounds)
					}
				}
				mu.Lock()
				seen = append(seen, observation{start: start, round: rounds[0]})
				mu.Unlock()
			}
		})
	}

	for k := range rounds {
		meta := fmt.Sprintf(`{"round":%d}`, k)
		res := v.do("POST", "/v1/threads", `{"id":"race","metadata":`+meta+`}`)
		if res.status != 201 {
			t.Fatalf("round %d: create: %d %s", k, res.status, res.body)
		}
		run := fmt.Sprintf(`{"agent":"ext","input":{"messages":[{"role":"user","content":"secret-%d"}]}}`, k)
		if res := v.do("POST", "/v1/threads/race/runs", run); res.status != 201 {
			// run_active here is the deleted thread's run, still cached.
			t.Errorf("round %d: a run on the thread created again: %d %s", k, res.status, res.body)
		}
		if res := v.do("DELETE", "/v1/threads/race", nil); res.status != 204 {
			t.Fatalf("round %d: delete: %d %s", k, res.status, res.body)
		}
		mu.Lock()
		deletedAt[k] = time.Now()
		mu.Unlock()
	}
	stop.Store(true)
	wg.Wait()

	late := 0
	for _, o := range seen {
		if o.start.After(deletedAt[o.round]) {
			late++
			problem("a read that started %v after the DELETE of round %d answered shows round %d",
				o.start.Sub(deletedAt[o.round]), o.round, o.round)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d rounds, %d reads, %d showed a thread, %d after its DELETE answered", rounds, reads.Load(), hits.Load(), late)
}

type observation struct {
	start time.Time
	round int
}

// readRace reads the thread "race" one way (0: GET the thread, 1: its
// events as JSON, 2: its SSE stream up to the snapshot) and returns the
// rounds of what it shows: the metadata's and those of the secrets in its
// messages. None if the thread was not found (or had nothing to tell).
func readRace(client *http.Client, url string, how int) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path, accept := "/v1/threads/race", "application/json"
	switch how {
	case 1:
		path += "/events?after=-1"
	case 2:
		path, accept = path+"/events", "text/event-stream"
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url+path, nil)
	req.Header.Set("Accept", accept)
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode == 404 {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil, nil
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return nil, fmt.Errorf("GET %s: %d %s", path, res.StatusCode, b)
	}
	var snap tether.Snapshot
	switch how {
	case 0:
		if err := json.NewDecoder(res.Body).Decode(&snap); err != nil {
			return nil, fmt.Errorf("GET %s: %v", path, err)
		}
	case 1:
		var body struct{ Events []tether.Event }
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			return nil, fmt.Errorf("GET %s: %v", path, err)
		}
		var rounds []int
		for _, e := range body.Events {
			if e.Message != nil {
				rounds = append(rounds, secretRounds(e.Message.Parts)...)
			}
		}
		return rounds, nil
	case 2:
		rd := ssetest.NewReader(res.Body)
		for {
			f, err := rd.Next()
			if err != nil {
				// Closed before its snapshot: the thread was deleted
				// while the stream started, which ends it.
				return nil, nil
			}
			if f.Event == "snapshot" {
				if err := json.Unmarshal([]byte(f.Data), &snap); err != nil {
					return nil, fmt.Errorf("snapshot: %v", err)
				}
				break
			}
		}
	}
	var meta struct{ Round *int }
	_ = json.Unmarshal(snap.Thread.Metadata, &meta)
	if meta.Round == nil {
		return nil, fmt.Errorf("GET %s: a thread without its round: %s", path, snap.Thread.Metadata)
	}
	rounds := []int{*meta.Round}
	for _, m := range snap.Messages {
		rounds = append(rounds, secretRounds(m.Parts)...)
	}
	return rounds, nil
}

func secretRounds(parts []tether.Part) []int {
	var out []int
	for _, p := range parts {
		if s, ok := strings.CutPrefix(p.Text, "secret-"); ok {
			if k, err := strconv.Atoi(s); err == nil {
				out = append(out, k)
			}
		}
	}
	return out
}
