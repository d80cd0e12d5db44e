package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/store"
)

// metadataOf returns a metadata object whose compact JSON is n bytes.
func metadataOf(n int) string {
	return `{"k":"` + strings.Repeat("x", n-len(`{"k":""}`)) + `"}`
}

// TestMetadataLimit: thread, run and input message metadata is at most
// 64 KiB of JSON (protocol.md §4); one byte more is bad_request, and nothing
// is created. Without the limit, a key could make many threads of 4 MiB of
// metadata each, and a page of the thread listing (up to 1000) would be
// built of gigabytes.
func TestMetadataLimit(t *testing.T) {
	v := newEnv(t, api.Options{})
	const limit = 64 << 10
	at, over := metadataOf(limit), metadataOf(limit+1)

	if r := v.do("POST", "/v1/threads", `{"id":"at","metadata":`+at+`}`); r.status != 201 {
		t.Fatalf("thread at the limit: %d", r.status)
	}
	if r := v.do("POST", "/v1/threads", `{"id":"over","metadata":`+over+`}`); r.status != 400 || r.code() != "bad_request" || !strings.Contains(string(r.body), "65536") {
		t.Fatalf("thread over the limit: %d %.200s", r.status, r.body)
	}
	v.mustDo(404, "GET", "/v1/threads/over", nil)
	// Whitespace is not counted: the limit is on the compact JSON.
	if r := v.do("POST", "/v1/threads", `{"id":"spaced","metadata":`+strings.Replace(at, ":", " : ", 1)+`}`); r.status != 201 {
		t.Fatalf("thread at the limit with spaces: %d %.200s", r.status, r.body)
	}

	run := func(metadata, inputMetadata string) *resp {
		body := `{"agent":"demo","metadata":` + metadata + `,"input":{"messages":[{"role":"user","content":"hi","metadata":` + inputMetadata + `}]}}`
		return v.do("POST", "/v1/threads/at/runs", body)
	}
	for name, r := range map[string]*resp{"run metadata": run(over, "{}"), "input message metadata": run("{}", over)} {
		if r.status != 400 || r.code() != "bad_request" || !strings.Contains(string(r.body), "65536") {
			t.Fatalf("%s over the limit: %d %.200s", name, r.status, r.body)
		}
	}
	if r := run(at, at); r.status != 201 {
		t.Fatalf("run at the limit: %d %.200s", r.status, r.body)
	}
}

// TestMetadataOverLimitStoredLoads: a thread stored with metadata over the
// limit (before the limit existed) still lists and loads.
func TestMetadataOverLimitStoredLoads(t *testing.T) {
	v := newEnv(t, api.Options{})
	big := metadataOf(256 << 10)
	now := tether.At(time.Now())
	row := tether.Thread{ID: "old", Status: tether.ThreadIdle, Metadata: json.RawMessage(big), CreatedAt: now, UpdatedAt: now, LastOffset: tether.OffsetStart}
	if _, err := v.st.Commit(context.Background(), &store.Batch{ThreadID: "old", Create: true, Thread: &row}); err != nil {
		t.Fatal(err)
	}
	var page struct{ Threads []tether.Thread }
	v.mustDo(200, "GET", "/v1/threads", nil).json(&page)
	if len(page.Threads) != 1 || len(page.Threads[0].Metadata) != len(big) {
		t.Fatalf("listing: %d threads", len(page.Threads))
	}
	var snap struct{ Thread tether.Thread }
	v.mustDo(200, "GET", "/v1/threads/old", nil).json(&snap)
	if len(snap.Thread.Metadata) != len(big) {
		t.Fatalf("thread's metadata is %d bytes, want %d", len(snap.Thread.Metadata), len(big))
	}
}
