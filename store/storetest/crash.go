package storetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// childEnv names the directory of the store a child process appends to.
const childEnv = "TETHER_STORETEST_CHILD"

const (
	crashThreads   = 6
	crashBatch     = 3   // events per batch
	crashKillAfter = 300 // acknowledged events
)

// crashChild is the child of testCrashRecovery: it appends to a few threads
// until it is killed, printing "ack <thread> <n> <offset>" for each event of
// each batch Commit acknowledged (n counts the thread's events from 0).
func crashChild(t *testing.T, h Harness, dir string) {
	// The parent kills this process; should it die first, this ends it.
	time.AfterFunc(3*time.Minute, func() { os.Exit(3) })
	st := h.Open(t, dir)
	var mu sync.Mutex
	write := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stdout.WriteString(s); err != nil {
			os.Exit(4) // the parent is gone
		}
	}
	var wg sync.WaitGroup
	for i := range crashThreads {
		id := fmt.Sprintf("crash-%d", i)
		wg.Go(func() {
			for n := 0; ; n += crashBatch {
				b := &store.Batch{ThreadID: id, Version: int64(n)}
				if n == 0 {
					now := tether.Now()
					b.Create = true
					b.Thread = &tether.Thread{ID: id, Status: tether.ThreadBusy, CreatedAt: now, UpdatedAt: now}
				}
				for j := range crashBatch {
					data, _ := json.Marshal(payload{Tag: id, I: n + j})
					ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now(), RunID: "run-" + id, Data: data}
					enc, err := ev.Encode()
					if err != nil {
						write(fmt.Sprintf("error %s: %v\n", id, err))
						os.Exit(2)
					}
					b.Events, b.Encoded = append(b.Events, ev), append(b.Encoded, enc)
				}
				res, err := st.Commit(ctx, b)
				if err != nil {
					write(fmt.Sprintf("error %s: %v\n", id, err))
					os.Exit(2)
				}
				var sb strings.Builder
				for j, r := range res.Records {
					fmt.Fprintf(&sb, "ack %s %d %s\n", id, n+j, r.Offset)
				}
				write(sb.String())
			}
		})
	}
	wg.Wait()
}

// childPattern is the -test.run pattern that runs exactly the test t.
func childPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

type ack struct {
	n      int
	offset tether.Offset
}

// testCrashRecovery kills a process that appends, for real (SIGKILL), then
// reopens its store: every acknowledged event is there at its offset, the
// log of each thread is a prefix of what was attempted, and new events get
// greater offsets.
func testCrashRecovery(t *testing.T, s *suite) {
	switch runtime.GOOS {
	case "js", "wasip1", "ios", "android":
		t.Skip("cannot re-execute the test binary on " + runtime.GOOS)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run="+childPattern(s.runName), "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var killOnce sync.Once
	kill := func() { killOnce.Do(func() { _ = cmd.Process.Kill() }) }
	timer := time.AfterFunc(deadline, kill)
	defer timer.Stop()

	acks := map[string][]ack{}
	count, killedAt := 0, 0
	var childErrs []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "ack":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("child wrote %q", sc.Text())
			}
			acks[f[1]] = append(acks[f[1]], ack{n, tether.Offset(f[3])})
			if count++; count == crashKillAfter {
				killedAt = count
				kill()
			}
		case len(f) > 0 && f[0] == "error":
			childErrs = append(childErrs, sc.Text())
		}
	}
	kill()
	waitErr := cmd.Wait()
	if len(childErrs) > 0 || killedAt == 0 {
		t.Fatalf("the child failed after %d acks (%v): %v\nstderr:\n%s", count, waitErr, childErrs, stderr.String())
	}
	t.Logf("killed the child after %d acks; read %d acks in all", killedAt, count)

	st := s.open(t, dir)
	highest := tether.OffsetStart
	for i := range crashThreads {
		id := fmt.Sprintf("crash-%d", i)
		log, err := st.ReadEvents(ctx, id, tether.OffsetStart, 1<<20)
		if errors.Is(err, store.ErrNotFound) && len(acks[id]) == 0 {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		// The log is a prefix of what the child attempted.
		for n, r := range log {
			if p := payloadOf(t, r); p.Tag != id || p.I != n {
				t.Fatalf("%s: event %d is %+v: the log is not a prefix of the appends", id, n, p)
			}
			if n > 0 && !r.Offset.After(log[n-1].Offset) {
				t.Fatalf("%s: offset %q does not follow %q", id, r.Offset, log[n-1].Offset)
			}
		}
		// It holds every acknowledged event, at its offset.
		for _, a := range acks[id] {
			if a.n >= len(log) {
				t.Fatalf("%s: acknowledged event %d (%s) is lost; the log holds %d", id, a.n, a.offset, len(log))
			}
			if log[a.n].Offset != a.offset {
				t.Fatalf("%s: acknowledged event %d was at %s, now at %s", id, a.n, a.offset, log[a.n].Offset)
			}
		}
		if tr := threadOf(t, st, id); tr.Version != int64(len(log)) {
			t.Fatalf("%s: version %d, log of %d", id, tr.Version, len(log))
		}
		highest = max(highest, maxOffset(log))
	}
	// The store works on, above every offset the child may have handed out.
	for i := range crashThreads {
		id := fmt.Sprintf("crash-%d", i)
		tr, err := st.Thread(ctx, id)
		if err != nil {
			continue
		}
		res := commit(t, st, appendBatch(t, id, tr.Version, 2, "after"))
		if !res.Records[0].Offset.After(highest) {
			t.Fatalf("%s: new offset %q is not above %q", id, res.Records[0].Offset, highest)
		}
	}
}
