package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherhq/tether/internal/nest"
)

// FuzzWSFrame sends arbitrary client frames on one WebSocket, as a page
// would. Whatever a frame is: no server fault and the socket stays open
// (unless the frame is over 64 KiB); it gets exactly the answers of §5 —
// nothing for a pong, one pong for a ping, else one subscribed or one
// error with a code of the table, carrying the frame's id when it had a
// valid one; a subscription delivers events of the log, byte for byte,
// and ends once with an end frame when unsubscribed.
func FuzzWSFrame(f *testing.F) {
	v := newFuzzEnv(f)
	tid, rid, lease := v.claimed(f)
	batch := `[{"type":"message.started","message_id":"m1","role":"assistant"},{"type":"text.delta","message_id":"m1","delta":"a"},{"type":"run.finished","status":"done"}]`
	if r := v.do(f, "POST", "/v1/runs/"+rid+"/events", []byte(batch), "Tether-Lease", lease); r.status != 200 {
		f.Fatalf("append: %d %s", r.status, r.body)
	}
	inLog := map[string]bool{}
	for _, raw := range v.log(f, tid) {
		inLog[string(raw)] = true
	}
	for _, s := range []string{
		`{"op":"subscribe","id":"a","thread_id":"` + tid + `"}`,
		`{"op":"subscribe","id":"b","run_id":"` + rid + `","after":"-1","types":["text.delta"]}`,
		`{"op":"subscribe","id":"c","thread_id":"` + tid + `","message_id":"m1","after":"now"}`,
		`{"op":"subscribe","id":"d","thread_id":"nope"}`,
		`{"op":"subscribe","id":"e","thread_id":"` + tid + `","run_id":"run_x"}`,
		`{"op":"subscribe","id":"f","thread_id":"` + tid + `","after":"1/2"}`,
		`{"op":"subscribe","id":"g","thread_id":"` + tid + `","bogus":1}`,
		`{"op":"unsubscribe","id":"zz"}`, `{"op":"ping","id":"p"}`, `{"op":"ping"}`, `{"op":"pong"}`,
		`{"op":"x","id":1}`, "{\"op\":\"ping\",\"id\":\"\xff\"}", `{"id":"` + strings.Repeat("i", 129) + `"}`, `[]`, `"op"`, `{`, ``, ` {"op":"ping"} `,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"op":"ping"}`), true)

	var c *websocket.Conn
	dial := func(t testing.TB) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if c, _, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(v.url, "http")+"/v1/ws", nil); err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.SetReadLimit(-1)
	}
	f.Cleanup(func() {
		if c != nil {
			c.CloseNow()
		}
	})
	type frame struct {
		Op, ID, Reason string
		Error          *struct{ Code string }
		Event          json.RawMessage
		raw            []byte
	}
	// got is every frame read for the current input, shown when one that
	// is awaited does not come.
	var got []frame
	read := func(t *testing.T, awaited string) frame {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				var all []string
				for _, m := range got {
					all = append(all, string(m.raw))
				}
				t.Fatalf("waiting for %s: %v; read so far: %s", awaited, err, strings.Join(all, " "))
			}
			var m frame
			if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m.Op == "" {
				t.Fatalf("a server frame %q", b)
			}
			m.raw = b
			if m.Op == "event" && !inLog[string(m.Event)] {
				t.Fatalf("event %s is not in the log", m.Event)
			}
			if m.Op != "ping" {
				got = append(got, m)
				return m
			}
		}
	}
	write := func(t *testing.T, typ websocket.MessageType, b []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Write(ctx, typ, b); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	codes := map[string]bool{"bad_request": true, "conflict": true, "too_large": true, "forbidden": true, "not_found": true}

	f.Fuzz(func(t *testing.T, data []byte, binary bool) {
		if c == nil {
			dial(t)
		}
		// After a failure the socket may be closed (a read that timed out
		// closes it) or hold answers not read: the next input starts on a
		// new one, and fails only for itself.
		t.Cleanup(func() {
			if t.Failed() && c != nil {
				c.CloseNow()
				c = nil
			}
		})
		got = got[:0]
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		if len(data) > 64<<10 {
			write(t, typ, data)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _, err := c.Read(ctx)
			if st := websocket.CloseStatus(err); st != websocket.StatusMessageTooBig {
				t.Fatalf("a %d-byte frame: %v", len(data), err)
			}
			c = nil
			return
		}
		var head struct {
			Op json.RawMessage `json:"op"`
			ID json.RawMessage `json:"id"`
		}
		obj := !binary && json.Valid(data) && nest.Check(data) == nil && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
		var op, id string
		idOK := false
		if obj {
			_ = json.Unmarshal(data, &head)
			_ = json.Unmarshal(head.Op, &op)
			idOK = json.Unmarshal(head.ID, &id) == nil && id != "" && len(id) <= 128 && !bytes.Equal(head.ID, []byte("null"))
		}
		noID := len(head.ID) == 0 || idOK || bytes.Equal(head.ID, []byte("null"))
		want := 1
		if obj && op == "pong" && noID {
			want = 0
		}

		// Answers may overtake each other (a subscribe is answered once
		// its subscription is made): read until this frame's answer and a
		// ping sent after it are both in, then once more to see that
		// nothing else follows.
		write(t, typ, data)
		var answers []frame
		for round := 0; round < 2; round++ {
			write(t, websocket.MessageText, []byte(`{"op":"ping","id":"~sync"}`))
			synced := false
			for !synced || len(answers) < want {
				awaited := fmt.Sprintf("the answer to %q", data)
				if !synced {
					awaited = fmt.Sprintf("pong ~sync (round %d) after %q", round+1, data)
				}
				m := read(t, awaited)
				switch {
				case m.Op == "pong" && m.ID == "~sync":
					synced = true
				case m.Op == "subscribed" || m.Op == "error" || m.Op == "pong" || m.Op == "end" && m.Reason == "unsubscribed":
					answers = append(answers, m)
				}
			}
		}
		if want == 0 {
			if len(answers) != 0 {
				t.Fatalf("a pong was answered: %s", answers[0].raw)
			}
			return
		}
		if obj && op == "ping" && noID {
			if len(answers) != 1 || answers[0].Op != "pong" || answers[0].ID != id {
				t.Fatalf("ping %s answered %d frames", data, len(answers))
			}
			return
		}
		if len(answers) != 1 {
			var all []string
			for _, a := range got {
				all = append(all, string(a.raw))
			}
			t.Fatalf("frame %q: %d answers: %s", data, len(answers), strings.Join(all, " "))
		}
		a := answers[0]
		if idOK && a.ID != id || !idOK && a.ID != "" {
			t.Fatalf("frame %q answered with id %q", data, a.ID)
		}
		switch a.Op {
		case "error":
			if a.Error == nil || !codes[a.Error.Code] {
				t.Fatalf("frame %q: error %s", data, a.raw)
			}
		case "end": // an unsubscribe of an open subscription
			if op != "unsubscribe" {
				t.Fatalf("frame %q ended a subscription", data)
			}
		case "subscribed":
			if op != "subscribe" {
				t.Fatalf("frame %q subscribed", data)
			}
			// Close it, so that every input starts from an empty socket:
			// an unsubscribe is answered by the end, or by not_found if
			// the subscription had ended by itself.
			b, _ := json.Marshal(map[string]string{"op": "unsubscribe", "id": id})
			write(t, websocket.MessageText, b)
			for {
				m := read(t, fmt.Sprintf("the answer to the unsubscribe of %q (its end unsubscribed, or not_found after its own end)", id))
				if m.ID == id && (m.Op == "end" && m.Reason == "unsubscribed" || m.Op == "error" && m.Error != nil && m.Error.Code == "not_found") {
					break
				}
			}
		default:
			t.Fatalf("frame %q answered %s", data, a.raw)
		}
	})
}
