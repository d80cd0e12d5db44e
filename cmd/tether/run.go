package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

// stdin is where tether run reads the answer to a waiting run. Tests
// replace it.
var stdin io.Reader = os.Stdin

func runCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", `run [flags] "prompt"`, env, stderr)
	server := fs.String("server", "TETHER_SERVER", "http://127.0.0.1:8080", "URL of the Tether server")
	token := fs.Secret("token", "TETHER_TOKEN", "API token, sent as Authorization: Bearer")
	agent := fs.String("agent", "TETHER_AGENT", "demo", "agent that answers the prompt")
	threadID := fs.String("thread", "TETHER_THREAD", "", "thread to run on (default: a new thread)")
	metadata := fs.String("metadata", "TETHER_RUN_METADATA", "", `JSON object stored with the run, like '{"demo":{"tokens":500}}'`)
	jsonOut := fs.Bool("json", "TETHER_JSON", false, "print every event as one JSON line instead of the answer's text")
	reasoning := fs.Bool("reasoning", "TETHER_REASONING", false, "show the agent's reasoning, dimmed, on stderr")
	words, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	prompt := strings.TrimSpace(strings.Join(words, " "))
	if prompt == "" {
		fmt.Fprintln(stderr, "tether run: the prompt is missing")
		fs.Usage()
		return errUsage
	}
	var meta json.RawMessage
	if *metadata != "" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(*metadata), &m); err != nil || m == nil {
			return fmt.Errorf("--metadata must be a JSON object, like '{\"demo\":{\"tokens\":500}}'")
		}
		meta = json.RawMessage(*metadata)
	}

	if err := checkServer(*server); err != nil {
		return err
	}
	c := client.New(*server, &client.Options{Token: *token})
	tid := *threadID
	if tid == "" {
		// The title is what lists of threads show (tether threads, the page).
		th, err := c.CreateThread(ctx, "", map[string]string{"title": titleOf(prompt)})
		if err != nil {
			return during("create a thread", err)
		}
		tid = th.ID
	}
	req := client.RunRequest{
		Agent: *agent,
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: prompt}}},
	}
	if meta != nil {
		req.Metadata = meta
	}
	run, err := c.CreateRun(ctx, tid, req)
	if err != nil {
		if ctx.Err() != nil {
			// The server may have made the run before the interrupt.
			fmt.Fprintf(stderr, "Interrupted before the server answered; the run may have started. See it with: tether tail %s\n", tid)
			return errors.New("interrupted")
		}
		return during("start the run", err)
	}

	p := newPrinter(stdout, stderr, env)
	p.json, p.reasoning = *jsonOut, *reasoning
	p.note(fmt.Sprintf("run %s on thread %s", run.ID, tid))

	fctx, cancel := context.WithCancelCause(ctx)
	in := &answerer{c: c, runID: run.ID, cancel: cancel, quit: make(chan struct{}), r: stdin}
	defer in.stop()
	defer cancel(nil)

	var last tether.Offset
	var end *tether.Event
	var followErr error
	conn := &connNotes{note: p.note, cursor: func() tether.Offset { return last }}
	for u, err := range c.Subscribe(fctx, client.SubscribeRequest{ThreadID: tid, RunID: run.ID, After: tether.OffsetStart, OnState: conn.onState}) {
		if err != nil {
			followErr = err
			break
		}
		if u.Snapshot != nil {
			last = u.Snapshot.Offset
			p.snapshot(u.Snapshot)
			continue
		}
		ev := u.Event
		last = ev.Offset
		p.event(ev)
		switch ev.Type {
		case tether.EventRunWaiting:
			if ev.Request != nil {
				in.ask(fctx, ev.Request)
			}
		case tether.EventRunInput:
			in.answered(ev.RequestID)
		case tether.EventRunFinished:
			end = ev
		}
	}
	p.finish()

	switch {
	case end != nil:
		return ended(run.ID, tether.RunStatus(end.Status), errorInfo(end.Error))
	case ctx.Err() != nil:
		resume := "tether tail " + tid
		if last != "" {
			resume = fmt.Sprintf("tether tail --after %s %s", last, tid)
		}
		fmt.Fprintf(stderr, "Stopped following run %s; it goes on. Follow it with: %s\n", run.ID, resume)
		return errors.New("interrupted")
	case context.Cause(fctx) != nil && !errors.Is(context.Cause(fctx), context.Canceled):
		return context.Cause(fctx)
	case followErr != nil:
		return during("follow the run", followErr)
	}
	// The stream ended without run.finished: the run had ended before the
	// cursor (the client checked). Ask for its end.
	snap, err := c.Run(ctx, run.ID)
	if err != nil {
		return during("get the run", err)
	}
	r := snap.Runs[0]
	if !r.Status.Terminal() {
		return fmt.Errorf("the stream of run %s ended while the run is %s", run.ID, r.Status)
	}
	return ended(run.ID, r.Status, r.Error)
}

// titleOf is a thread's title from its first prompt: one line, at most
// about 60 bytes.
func titleOf(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if len(t) > 60 {
		t = shorten(t, 57)
	}
	return t
}

// parseInterspersed parses flags before, between and after the positional
// arguments, which it returns: "tether run "hi" --json" must not send
// "--json" as part of the prompt. A "--" ends the flags.
func parseInterspersed(fs *flagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// ended is the outcome of a finished run: nil if done.
func ended(runID string, status tether.RunStatus, info *tether.ErrorInfo) error {
	if status == tether.RunDone {
		return nil
	}
	if info != nil && info.Message != "" {
		return fmt.Errorf("run %s ended %s: %s", runID, status, safeText(info.Message))
	}
	return fmt.Errorf("run %s ended %s", runID, status)
}

func errorInfo(raw json.RawMessage) *tether.ErrorInfo {
	var info tether.ErrorInfo
	if len(raw) == 0 || json.Unmarshal(raw, &info) != nil {
		return nil
	}
	return &info
}

// during adds what the command was doing to a server's error (transport
// errors already say it).
func during(what string, err error) error {
	var te *tether.Error
	if errors.As(err, &te) {
		return fmt.Errorf("%s: %w", what, err)
	}
	// A server not started yet is the usual first error: say so, in one
	// line, as tether bench does, not as the Go error of the request.
	var ue *url.Error
	if errors.Is(err, syscall.ECONNREFUSED) && errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return fmt.Errorf("%s: cannot reach the server at %s://%s: connection refused (is tether serve running? --server or $TETHER_SERVER says where)", what, u.Scheme, u.Host)
		}
	}
	return err
}

// answerer answers a waiting run with a line read from stdin. One
// goroutine reads lines, only when asked, so that nothing is read ahead;
// on a terminal it may stay blocked in Read when the command ends, which
// is harmless in a process that is about to exit.
type answerer struct {
	c      *client.Client
	runID  string
	cancel context.CancelCauseFunc
	r      io.Reader
	quit   chan struct{}

	mu      sync.Mutex
	pending *tether.Request // the open request, if any
	asked   bool            // the reader runs
	wg      sync.WaitGroup
}

// ask starts reading the answer to req, unless a line is already being
// read: the line then answers the latest request.
func (a *answerer) ask(ctx context.Context, req *tether.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending = req
	if a.asked {
		return
	}
	a.asked = true
	lines := make(chan lineResult)
	go readLines(a.r, lines, a.quit)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case l, ok := <-lines:
				if !ok || !a.answer(ctx, l) {
					return
				}
			}
		}
	}()
}

type lineResult struct {
	text string
	err  error
}

// readLines sends the lines of r to out until r ends or quit is closed.
func readLines(r io.Reader, out chan<- lineResult, quit <-chan struct{}) {
	defer close(out)
	br := bufio.NewReader(r)
	for {
		s, err := br.ReadString('\n')
		s = strings.TrimRight(s, "\r\n")
		if err != nil && s != "" {
			err = nil // a last line without a newline
		}
		select {
		case out <- lineResult{s, err}:
		case <-quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// answer sends one line as the input of the open request. It returns
// false when no more lines will come.
func (a *answerer) answer(ctx context.Context, l lineResult) bool {
	a.mu.Lock()
	req := a.pending
	if l.err == nil {
		a.pending = nil
	}
	a.mu.Unlock()
	if l.err != nil {
		if req != nil {
			a.cancel(fmt.Errorf("run %s waits for input, but stdin is empty: run tether run in a terminal or pipe the answer in (the run stays waiting; answer it with POST /v1/runs/%s/input)", a.runID, a.runID))
		}
		return false
	}
	if req == nil {
		return true // typed ahead of any question: nothing to answer
	}
	if err := a.c.SubmitInput(ctx, a.runID, req.ID, l.text); err != nil && ctx.Err() == nil {
		a.cancel(during("send the input", err))
		return false
	}
	return true
}

// answered notes that a request got its input (from us or elsewhere).
func (a *answerer) answered(requestID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending != nil && a.pending.ID == requestID {
		a.pending = nil
	}
}

func (a *answerer) stop() {
	close(a.quit)
	a.wg.Wait()
}

// printer shows a run's events: the answer's text on stdout, the rest as
// notes on stderr; or every event as a JSON line.
type printer struct {
	out, err  io.Writer
	json      bool
	reasoning bool
	dim       bool // stderr is a terminal that takes colors
	ttys      bool // both are terminals: keep their lines apart

	outMid, errMid bool // the last line written is not ended
	roles          map[string]tether.Role
	tools          map[string]*toolNote
	openTool       string // the call whose "→" line is open on stderr
}

type toolNote struct {
	name     string
	input    strings.Builder
	streamed bool
}

func newPrinter(stdout, stderr io.Writer, env func(string) string) *printer {
	ttyErr := isTerminal(stderr)
	return &printer{
		out: stdout, err: stderr,
		dim:   ttyErr && env("NO_COLOR") == "" && env("TERM") != "dumb",
		ttys:  ttyErr && isTerminal(stdout),
		roles: map[string]tether.Role{},
		tools: map[string]*toolNote{},
	}
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// text writes the answer's text on stdout.
func (p *printer) text(s string) {
	if s == "" {
		return
	}
	if p.errMid && p.ttys {
		p.endErr()
	}
	io.WriteString(p.out, s)
	p.outMid = !strings.HasSuffix(s, "\n")
}

// note writes one line on stderr.
func (p *printer) note(line string) {
	p.endErr()
	if p.outMid && p.ttys {
		io.WriteString(p.out, "\n")
		p.outMid = false
	}
	fmt.Fprintln(p.err, safeText(line))
}

func (p *printer) endErr() {
	if p.errMid {
		io.WriteString(p.err, "\n")
		p.errMid = false
	}
	p.openTool = ""
}

func (p *printer) snapshot(s *tether.Snapshot) {
	if p.json {
		p.jsonLine(struct {
			Snapshot *tether.Snapshot `json:"snapshot"`
		}{s})
		return
	}
	if s.Reset {
		// The cursor is not in the log any more (the server lost its tail
		// in a crash, or was restored from a backup): what follows goes on
		// from what the server kept, which the text already printed may
		// not match. Said, rather than left for the reader to notice.
		p.note(fmt.Sprintf("the server no longer has the events this output was at; it goes on from what it kept (offset %s), so the text above may differ from the run's answer", s.Offset))
	}
}

func (p *printer) jsonLine(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	p.out.Write(append(b, '\n'))
}

func (p *printer) event(ev *tether.Event) {
	if p.json {
		p.jsonLine(ev)
		if ev.Type == tether.EventRunWaiting && ev.Request != nil {
			p.note("? " + question(ev.Request))
		}
		return
	}
	switch ev.Type {
	case tether.EventMessageStarted:
		p.roles[ev.MessageID] = ev.Role
		if ev.Role == tether.RoleAssistant && p.outMid {
			p.text("\n")
		}
	case tether.EventMessageCreated:
		if m := ev.Message; m != nil && m.Role == tether.RoleAssistant {
			for _, part := range m.Parts {
				if part.Type == tether.PartText {
					p.text(part.Text)
				}
			}
		}
	case tether.EventTextDelta:
		if r, ok := p.roles[ev.MessageID]; !ok || r == tether.RoleAssistant {
			p.text(ev.Delta)
		}
	case tether.EventReasoningDelta:
		if p.reasoning && ev.Delta != "" {
			if p.openTool != "" {
				p.endErr()
			}
			if p.outMid && p.ttys {
				p.text("\n")
			}
			d := safeText(ev.Delta)
			if p.dim {
				d = "\x1b[2m" + d + "\x1b[0m"
			}
			io.WriteString(p.err, d)
			p.errMid = !strings.HasSuffix(ev.Delta, "\n")
		}
	case tether.EventToolStarted:
		p.tools[ev.CallID] = &toolNote{name: ev.Name}
		p.endErr()
		if p.outMid && p.ttys {
			p.text("\n")
		}
		fmt.Fprintf(p.err, "→ %s ", safeLine(ev.Name))
		p.errMid, p.openTool = true, ev.CallID
	case tether.EventToolDelta:
		t := p.tools[ev.CallID]
		if t == nil {
			return
		}
		t.input.WriteString(ev.Delta)
		if p.openTool == ev.CallID && t.input.Len() <= maxInputShown {
			io.WriteString(p.err, safeText(ev.Delta))
			t.streamed = true
		}
	case tether.EventToolFinished:
		t := p.tools[ev.CallID]
		if t == nil {
			t = &toolNote{name: ev.Name}
		}
		delete(p.tools, ev.CallID)
		input := t.input.String()
		if input == "" && len(ev.Input) > 0 {
			input = string(ev.Input)
		}
		switch {
		case p.openTool != ev.CallID:
			p.note("→ " + t.name + " " + shorten(input, maxInputShown))
		case !t.streamed:
			io.WriteString(p.err, safeText(shorten(input, maxInputShown)))
		case len(input) > maxInputShown:
			io.WriteString(p.err, "…")
		}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			p.note("← error: " + shorten(errorText(ev.Error), 200))
		} else {
			p.note("← done")
		}
	case tether.EventRunWaiting:
		if ev.Request != nil {
			p.note("? " + question(ev.Request))
		}
	}
}

// maxInputShown bounds the tool input shown in a note.
const maxInputShown = 200

// finish ends the last lines.
func (p *printer) finish() {
	if p.outMid {
		io.WriteString(p.out, "\n")
		p.outMid = false
	}
	p.endErr()
}

// question is what a waiting run asks: its payload's prompt, or the payload.
func question(r *tether.Request) string {
	var q struct {
		Prompt string `json:"prompt"`
	}
	if json.Unmarshal(r.Payload, &q) == nil && q.Prompt != "" {
		return q.Prompt
	}
	if len(r.Payload) > 0 && string(r.Payload) != "null" {
		return r.Kind + " " + shorten(string(r.Payload), 200)
	}
	return "the run waits for " + r.Kind
}

// errorText is the message of a tool's or a run's error: a string, an
// object's message, or its JSON.
func errorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
