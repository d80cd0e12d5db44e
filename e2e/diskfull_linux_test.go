package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of the given size (e.g. "4m") on a new
// directory and unmounts it when the test ends, after the servers it
// started have stopped. It skips the test where mounting is not permitted
// (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("a tmpfs cannot be mounted here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestDiskFull runs the real server on a 4 MiB disk and appends to a run,
// as an idempotent producer, until the disk is full, while a client
// follows the thread. A write the disk refuses must answer 503
// unavailable (creating a thread as well as appending); nothing
// acknowledged may be lost, nothing of a refused append may be visible,
// and the server must go on serving reads. Once there is room again, the
// refused append retried is appended (200), exactly once (a second retry
// is a duplicate, 204), and the client has seen only what the log holds.
func TestDiskFull(t *testing.T) {
	disk := mountTmpfs(t, "4m")
	s := start(t, filepath.Join(disk, "data"), "--limit-appends", "0", "--limit-append-bytes", "0")
	tid, l := s.externalRun(t, "fill the disk")
	ctx := t.Context()
	f := s.follow(ctx, "subscriber", "/v1/threads/"+tid+"/events", followOptions{After: "-1", Resume: true})
	<-f.connected

	pad := strings.Repeat("z", 32<<10)
	appendSeq := func(seq int) appendResult {
		return s.appendEvents(ctx, l, message(fmt.Sprintf("m%d", seq), pad), "Producer-Id", "filler", "Producer-Epoch", "0", "Producer-Seq", fmt.Sprint(seq))
	}
	acked := map[string]string{} // message id → next_offset
	refused := -1
	var res appendResult
	for seq := 0; seq < 1000; seq++ {
		if res = appendSeq(seq); res.Status != http.StatusOK || res.Err != nil {
			refused = seq
			break
		}
		acked[fmt.Sprintf("m%d", seq)] = res.Next
	}
	if refused < 0 {
		t.Fatal("1000 appends of 32 KiB fit on a 4 MiB disk")
	}
	t.Logf("the disk was full after %d appends", refused)
	wantUnavailable(t, "the append refused by the full disk", res.Status, res.Body, res.Err)
	// Smaller writes may still find room for a while; the first that does
	// not is refused the same way.
	for i := range 200 {
		status, body, err := s.call(ctx, http.MethodPost, "/v1/threads", map[string]any{})
		if status != http.StatusCreated {
			wantUnavailable(t, "a thread created on the full disk", status, body, err)
			break
		}
		if i == 199 {
			t.Fatal("200 threads created on a full disk")
		}
	}
	if status, _, err := s.call(ctx, http.MethodGet, "/readyz", nil); status != http.StatusOK {
		t.Fatalf("/readyz on a full disk: %d %v", status, err)
	}
	checkAcked := func(when string, log []logEvent) {
		t.Helper()
		perMessage := map[string]int{}
		idx := logIndex(log)
		for _, e := range log {
			perMessage[e.MessageID]++
		}
		for id, next := range acked {
			if e, ok := idx[next]; !ok || e.MessageID != id || e.Type != "message.finished" || perMessage[id] != 3 {
				t.Fatalf("%s: acknowledged append %s (next_offset %s): the log has %d of its events, and %s at its offset", when, id, next, perMessage[id], e.Raw)
			}
		}
	}
	log := s.readLog(t, "/v1/threads/"+tid+"/events")
	checkAcked("on the full disk", log)
	for _, e := range log {
		if e.MessageID == fmt.Sprintf("m%d", refused) {
			t.Fatalf("an event of the refused append is in the log: %s", e.Raw)
		}
	}

	// Room again.
	if err := syscall.Mount("tmpfs", disk, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatalf("grow the disk: %v", err)
	}
	if res := appendSeq(refused); res.Status != http.StatusOK {
		t.Fatalf("the refused append retried once there is room: %d %v %s, want 200", res.Status, res.Err, res.Body)
	}
	if res := appendSeq(refused); res.Status != http.StatusNoContent {
		t.Fatalf("the refused append retried a second time: %d %v %s, want 204 (a duplicate)", res.Status, res.Err, res.Body)
	}
	if res := s.appendEvents(ctx, l, []map[string]any{{"type": "run.finished", "status": "done"}}); res.Status != http.StatusOK {
		t.Fatalf("finish the run: %d %v %s", res.Status, res.Err, res.Body)
	}
	log = s.readLog(t, "/v1/threads/"+tid+"/events")
	checkAcked("once there is room", log)
	n := 0
	for _, e := range log {
		if e.MessageID == fmt.Sprintf("m%d", refused) {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("the retried append has %d events in the log, want 3", n)
	}
	eventually(t, 30*time.Second, "the subscriber to see the run finish", func() bool {
		seen := f.seen()
		return len(seen) > 0 && seen[len(seen)-1].Type == "run.finished"
	})
	checkSeenInLog(t, f.name, f.seen(), logIndex(log))
	sameSequence(t, f.name, f.seen(), log)
}

// wantUnavailable checks an answer is 503 with the error code unavailable.
func wantUnavailable(t *testing.T, what string, status int, body []byte, err error) {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if err != nil || status != http.StatusServiceUnavailable || e.Error.Code != "unavailable" {
		t.Fatalf("%s: %d %v %s, want 503 unavailable", what, status, err, body)
	}
}
