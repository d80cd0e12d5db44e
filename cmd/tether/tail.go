package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

func tailCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tail", "tail [flags] THREAD", env, stderr)
	server := fs.String("server", "TETHER_SERVER", "http://127.0.0.1:8080", "URL of the Tether server")
	token := fs.Secret("token", "TETHER_TOKEN", "API token, sent as Authorization: Bearer")
	after := fs.String("after", "TETHER_AFTER", "", "print the events after this offset; -1 for the whole log, now for new events only (default: a snapshot first, then new events)")
	format := fs.String("format", "TETHER_FORMAT", "json", "json (one JSON object per line: the snapshot as {\"snapshot\":...}, then each event) or text (offset, type and a summary per line)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "tether tail: give one thread id")
		fs.Usage()
		return errUsage
	}
	if *format != "json" && *format != "text" {
		return fmt.Errorf("--format must be json or text, not %q", *format)
	}
	cursor, err := tether.ParseCursor(*after)
	if err != nil {
		return fmt.Errorf("--after: %s", strings.TrimPrefix(err.Error(), "bad_request: "))
	}
	if err := checkServer(*server); err != nil {
		return err
	}
	c := client.New(*server, &client.Options{Token: *token})
	var last tether.Offset
	conn := &connNotes{note: func(l string) { fmt.Fprintln(stderr, l) }, cursor: func() tether.Offset { return last }, server: *server}
	for u, err := range c.Subscribe(ctx, client.SubscribeRequest{ThreadID: pos[0], After: cursor, OnState: conn.onState}) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C is how tail ends
			}
			return during("follow the thread", err)
		}
		if u.Snapshot != nil {
			last = u.Snapshot.Offset
		} else {
			last = u.Event.Offset
		}
		var line []byte
		switch {
		case *format == "text" && u.Snapshot != nil:
			line = []byte(snapshotLine(u.Snapshot))
		case *format == "text":
			line = []byte(eventLine(u.Event))
		case u.Snapshot != nil:
			line, err = json.Marshal(struct {
				Snapshot *tether.Snapshot `json:"snapshot"`
			}{u.Snapshot})
		default:
			line, err = json.Marshal(u.Event)
		}
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		if _, err := stdout.Write(append(line, '\n')); err != nil {
			return err // stdout is gone (a closed pipe): stop
		}
	}
	return nil
}

func snapshotLine(s *tether.Snapshot) string {
	reset := ""
	if s.Reset {
		reset = " (reset: the cursor was not in the log)"
	}
	return safeLine(fmt.Sprintf("%s %-20s thread %s %s, %s, %s%s",
		s.Offset, "snapshot", s.Thread.ID, s.Thread.Status, count(len(s.Runs), "run"), count(len(s.Messages), "message"), reset))
}

// count is n with its noun: "1 run", "2 runs".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// eventLine is one human line for an event: offset, type, summary.
func eventLine(ev *tether.Event) string {
	return safeLine(fmt.Sprintf("%s %-20s %s", ev.Offset, ev.Type, summary(ev)))
}

func summary(ev *tether.Event) string {
	const n = 80
	switch ev.Type {
	case tether.EventRunCreated:
		if ev.Run != nil {
			return fmt.Sprintf("run %s agent %s", ev.Run.ID, ev.Run.Agent)
		}
	case tether.EventRunStarted:
		return fmt.Sprintf("run %s worker %s attempt %d", ev.RunID, ev.WorkerID, ev.Attempt)
	case tether.EventMessageCreated:
		if m := ev.Message; m != nil {
			var text strings.Builder
			for _, p := range m.Parts {
				if p.Type == tether.PartText {
					text.WriteString(p.Text)
				}
			}
			return fmt.Sprintf("%s %s %s", m.ID, m.Role, quote(text.String(), n))
		}
	case tether.EventMessageStarted:
		return fmt.Sprintf("%s %s", ev.MessageID, ev.Role)
	case tether.EventTextDelta, tether.EventReasoningDelta:
		return fmt.Sprintf("%s %s", ev.MessageID, quote(ev.Delta, n))
	case tether.EventToolStarted:
		return fmt.Sprintf("%s %s %s", ev.MessageID, ev.CallID, ev.Name)
	case tether.EventToolDelta:
		return fmt.Sprintf("%s %s %s", ev.MessageID, ev.CallID, quote(ev.Delta, n))
	case tether.EventToolFinished:
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			return fmt.Sprintf("%s %s error: %s", ev.MessageID, ev.CallID, shorten(errorText(ev.Error), n))
		}
		return fmt.Sprintf("%s %s done %s", ev.MessageID, ev.CallID, shorten(string(ev.Output), n))
	case tether.EventMessageUpdated:
		return fmt.Sprintf("%s %s", ev.MessageID, shorten(string(ev.Metadata), n))
	case tether.EventMessageFinished:
		return fmt.Sprintf("%s %s", ev.MessageID, ev.Status)
	case tether.EventRunWaiting:
		if ev.Request != nil {
			return fmt.Sprintf("run %s request %s: %s", ev.RunID, ev.Request.ID, shorten(question(ev.Request), n))
		}
	case tether.EventRunInput:
		return fmt.Sprintf("run %s request %s %s", ev.RunID, ev.RequestID, shorten(string(ev.Value), n))
	case tether.EventRunCancelRequested:
		return "run " + ev.RunID
	case tether.EventRunFinished:
		s := fmt.Sprintf("run %s %s", ev.RunID, ev.Status)
		if info := errorInfo(ev.Error); info != nil {
			s += fmt.Sprintf(": %s: %s", info.Code, shorten(info.Message, n))
		}
		return s
	case tether.EventCustom:
		return fmt.Sprintf("%s %s", ev.Name, shorten(string(ev.Data), n))
	case tether.EventStateSnapshot:
		return shorten(string(ev.State), n)
	case tether.EventStateDelta:
		return shorten(string(ev.Patch), n)
	}
	return "run " + ev.RunID
}

// quote quotes s for a one-line summary, cut to about n bytes.
func quote(s string, n int) string { return strconv.Quote(shorten(s, n)) }
