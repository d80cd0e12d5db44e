package api_test

import (
	"bufio"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// FuzzSubscribeQuery fuzzes what a subscriber sends: ?after=,
// Last-Event-ID, ?types=, ?message_id= and ?wait=, on thread and run
// subscriptions, over SSE and JSON. Whatever is sent: no server fault; a
// malformed cursor is bad_request; an answer delivers events of the log,
// byte for byte, in order, after the cursor (or the snapshot), and only
// those the filters keep; without a message filter, a complete answer
// delivers every event that the filters keep, none missing.
func FuzzSubscribeQuery(f *testing.F) {
	v := newFuzzEnv(f)
	tid, rid, lease := v.claimed(f)
	batch := `[{"type":"message.started","message_id":"m1","role":"assistant"},{"type":"text.delta","message_id":"m1","delta":"a"},` +
		`{"type":"custom","name":"n"},{"type":"text.delta","message_id":"m1","delta":"b"},{"type":"message.finished","message_id":"m1","status":"done"},` +
		`{"type":"run.finished","status":"done"}]`
	if r := v.do(f, "POST", "/v1/runs/"+rid+"/events", []byte(batch), "Tether-Lease", lease); r.status != 200 {
		f.Fatalf("append: %d %s", r.status, r.body)
	}
	log := v.log(f, tid)
	var evs []tether.Event
	for _, raw := range log {
		var e tether.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			f.Fatal(err)
		}
		evs = append(evs, e)
	}
	at := func(o tether.Offset) int {
		return slices.IndexFunc(evs, func(e tether.Event) bool { return e.Offset == o })
	}
	mid := string(evs[3].Offset)
	for _, c := range []string{"", "-1", "now", mid, string(evs[len(evs)-1].Offset), "0000000001_0000000000000001", "1/2", "x"} {
		for _, types := range []string{"", "text.delta", "custom,run.finished", ",,"} {
			f.Add(c, "", types, "", "", false, false)
			f.Add("", c, types, "m1", "5", true, true)
			f.Add(c, mid, types, "u1", "0", false, true)
		}
	}
	f.Add("-1", "", "", "nope", "-3", false, false)
	f.Add("-1", "", "", "", "99999999999999999999", false, false)

	f.Fuzz(func(t *testing.T, after, lastEventID, types, messageID, wait string, runPath, sse bool) {
		sendable(t, lastEventID)
		q := url.Values{}
		for k, val := range map[string]string{"after": after, "types": types, "message_id": messageID, "wait": wait} {
			if val != "" {
				q.Set(k, val)
			}
		}
		path := "/v1/threads/" + tid + "/events"
		if runPath {
			path = "/v1/runs/" + rid + "/events"
		} else {
			sse = false // a thread stream never ends by itself
		}
		accept := "application/json"
		if sse {
			accept = "text/event-stream"
		}
		var got []json.RawMessage
		var snap *tether.Snapshot
		r := v.do(t, "GET", path+"?"+q.Encode(), nil, "Accept", accept, "Last-Event-ID", lastEventID)
		checkError(t, "subscribe", r)
		cursor := lastEventID
		if cursor == "" {
			cursor = after
		}
		if _, err := tether.ParseCursor(cursor); err != nil {
			if r.status != 400 {
				t.Fatalf("cursor %q: %d %s", cursor, r.status, r.body)
			}
			return
		}
		if r.status != 200 {
			// Filters may be refused (an unknown message, a bad wait);
			// a plain subscription may not.
			if types == "" && messageID == "" && (wait == "" || sse) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			return
		}
		complete := true
		if sse {
			got, snap, complete = sseEvents(t, string(r.body))
		} else {
			var page struct {
				Events   []json.RawMessage
				UpToDate bool `json:"up_to_date"`
				Snapshot *tether.Snapshot
			}
			r.json(&page)
			got, snap, complete = page.Events, page.Snapshot, page.UpToDate
		}

		// Where delivery starts.
		start := -1 // index of the last event not delivered
		switch c := tether.Offset(cursor); {
		case c == tether.OffsetNow:
			start = len(evs) - 1
		case c == tether.OffsetStart || c == "" && !sse:
		case at(c) >= 0:
			start = at(c)
		}
		if snap != nil {
			if at(snap.Offset) < 0 {
				t.Fatalf("snapshot at %q, not an offset of the log", snap.Offset)
			}
			wantSnap := cursor == "" || start == -1 && cursor != "-1"
			if !wantSnap || snap.Reset != (cursor != "") {
				t.Fatalf("cursor %q: snapshot %+v", cursor, snap)
			}
			start = at(snap.Offset)
		} else if cursor == "" && sse || tether.Offset(cursor).IsEvent() && at(tether.Offset(cursor)) < 0 {
			t.Fatalf("cursor %q: no snapshot", cursor)
		}

		var keep []string
		if types != "" {
			keep = strings.Split(types, ",")
		}
		prev := start
		for _, raw := range got {
			var e tether.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("event %s: %v", raw, err)
			}
			i := at(e.Offset)
			if i < 0 || string(log[i]) != string(raw) {
				t.Fatalf("delivered %s, not in the log", raw)
			}
			if i <= prev {
				t.Fatalf("delivered %s at %d after %d (cursor %q)", e.Offset, i, prev, cursor)
			}
			prev = i
			if keep != nil && !slices.Contains(keep, e.Type) {
				t.Fatalf("types %q delivered a %s", types, e.Type)
			}
			if messageID != "" && e.MessageID != messageID && e.Type != "run.finished" {
				t.Fatalf("message %q delivered %s", messageID, raw)
			}
		}
		if messageID == "" && complete {
			var want []json.RawMessage
			for i := start + 1; i < len(evs); i++ {
				if (keep == nil || slices.Contains(keep, evs[i].Type)) && (!runPath || evs[i].RunID == rid) {
					want = append(want, log[i])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("cursor %q types %q: %d events delivered, want %d", cursor, types, len(got), len(want))
			}
		}
	})
}

// sseEvents parses a whole SSE answer: its events, its snapshot, and
// whether it ended with an end frame (so it delivered everything).
func sseEvents(t *testing.T, body string) (evs []json.RawMessage, snap *tether.Snapshot, ended bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 8<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "":
			switch event {
			case "", "connected", "ping":
			case "snapshot":
				snap = new(tether.Snapshot)
				if err := json.Unmarshal([]byte(data), snap); err != nil {
					t.Fatalf("snapshot %s: %v", data, err)
				}
			case "end":
				ended = true
			case "reconnect":
				t.Fatalf("stream cut: %s", data)
			default:
				evs = append(evs, json.RawMessage(data))
			}
			event, data = "", ""
		}
	}
	return evs, snap, ended
}
