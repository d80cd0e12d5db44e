package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/agui/mapping"
	"github.com/tetherhq/tether/internal/idle"
)

// Options configure an agent. URL is required.
type Options struct {
	// URL is the upstream AG-UI endpoint, http or https, to which each run
	// is POSTed as a RunAgentInput.
	URL string
	// HTTPClient sends the requests. Defaults to a client with no overall
	// timeout (runs stream for minutes) and a 30s timeout for the
	// response headers.
	HTTPClient *http.Client
	// IdleTimeout is how long the upstream may send nothing at all (not a
	// byte: SSE comments count) once it answered, before the request is
	// closed and the run ends error (upstream_disconnected). Defaults to
	// DefaultIdleTimeout; a negative value means no bound.
	IdleTimeout time.Duration
	// Logger receives a warning for each run that fails upstream (the
	// status, never the body). Defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultIdleTimeout is the default Options.IdleTimeout: 10 minutes, the
// read timeout of OpenAI's own SDKs, long enough for a model that thinks
// for minutes behind an agent that sends nothing meanwhile.
const DefaultIdleTimeout = 10 * time.Minute

// headerTimeout bounds the wait for the upstream's response headers.
const headerTimeout = 30 * time.Second

// maxBatch is how many events one append carries at most.
const maxBatch = 256

// maxBatchBytes bounds the JSON of the events one append gathers (a batch
// may pass it by the events of one upstream event): half the 1 MiB a
// JetStream store takes in one commit by default (its server's
// max_payload, which the batch's framing shares). A store that takes less
// (a smaller max_payload or max_msg_size) refuses the batch as too large,
// having written nothing, and gets it in halves (emit).
const maxBatchBytes = 512 << 10

// Agent proxies an upstream AG-UI agent: each run is one or more requests
// upstream (one more per interrupt answered), whose events are mapped
// (package mapping) and appended to the run as they arrive. It is safe for
// concurrent use.
type Agent struct {
	opts   Options
	client *http.Client
	log    *slog.Logger
}

// New returns an agent for the upstream at opts.URL, or an error if the
// URL is not an absolute http or https URL.
func New(opts Options) (*Agent, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := "(unparsable)"
		if err == nil {
			shown = u.Redacted()
		}
		return nil, fmt.Errorf("agui: %q is not an http or https URL", shown)
	}
	a := &Agent{opts: opts, client: opts.HTTPClient, log: opts.Logger}
	if a.client == nil {
		// Go's default transport (its dial and TLS handshake timeouts, the
		// proxy from the environment, HTTP/2) with a bound on the wait for
		// the headers and more idle connections to the one upstream.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = headerTimeout
		tr.MaxIdleConnsPerHost = 16
		a.client = &http.Client{Transport: tr}
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.opts.IdleTimeout == 0 {
		a.opts.IdleTimeout = DefaultIdleTimeout
	}
	return a, nil
}

// Run implements agents.Agent.
func (a *Agent) Run(ctx context.Context, s *agents.Session) error {
	taken := make(map[string]bool, len(s.Messages))
	for _, m := range s.Messages {
		taken[m.ID] = true
		for _, p := range m.Parts {
			if p.Type == tether.PartTool {
				taken[p.CallID] = true
			}
		}
	}
	m := mapping.New(mapping.Options{RunID: s.Run.ID, State: s.State, Sent: orDefault(optionsOf(s.Run).State, "{}"),
		Taken: func(id string) bool { return taken[id] }})
	var resume []byte
	for n := 0; ; n++ {
		runID := s.Run.ID
		if n > 0 {
			runID += "-" + strconv.Itoa(n)
		}
		body, err := input(s, m, runID, resume)
		if err != nil {
			return err
		}
		if f := a.stream(ctx, s, m, body); f != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			a.log.Warn("ag-ui agent failed", "run", s.Run.ID, "agent", s.Run.Agent, "code", f.info.Code, "err", f.cause)
			info := f.info
			if err := s.Finish(ctx, tether.RunError, &info); err != nil {
				return err
			}
			return nil
		}
		req := m.Waiting()
		if req == nil {
			return nil // the run finished with the upstream's
		}
		value, err := s.Ask(ctx, *req)
		if err != nil {
			return err
		}
		resume = resumeOf(value, req)
		m.Resume()
	}
}

// stream sends one request upstream and appends what it streams back,
// until its run ends (RUN_FINISHED, RUN_ERROR) or the stream does.
func (a *Agent) stream(ctx context.Context, s *agents.Session, m *mapping.Mapper, body []byte) *failure {
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.opts.URL, bytes.NewReader(body))
	if err != nil {
		return fail(CodeUpstreamError, "The AG-UI agent could not be reached.", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := a.client.Do(req)
	if err != nil {
		// A *url.Error names the URL, which may hold a key in its query.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fail(CodeUpstreamError, "The AG-UI agent could not be reached.", err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return fail(CodeUpstreamError, fmt.Sprintf("The AG-UI agent answered HTTP %d.", res.StatusCode), fmt.Errorf("status %d", res.StatusCode))
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fail(CodeUpstreamError, "The AG-UI agent did not answer with an event stream.", fmt.Errorf("content type %q", mt))
	}

	rbody := idle.New(res.Body, a.opts.IdleTimeout, cancelCause)
	defer rbody.Stop()

	// The reader maps events as they come; the loop below appends them,
	// all that came during the previous append in one.
	batches := make(chan []*tether.Event, 64)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- frames(rbody, func(data []byte) error {
			evs, err := m.Event(data)
			if err != nil {
				return err
			}
			if len(evs) > 0 {
				select {
				case batches <- evs:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if m.Ended() {
				return errEnded
			}
			return nil
		})
	}()
	for evs := range batches {
		evs = drain(evs, batches)
		if err := emit(ctx, s, coalesce(evs)); err != nil {
			// Why the append failed is read before the request is closed
			// below: that close ends ctx too, and an append the log
			// refused (an event too large) would look cancelled, the run
			// then ending done without the event.
			cause := context.Cause(ctx)
			cancel()
			for range batches {
			}
			if errors.Is(cause, idle.ErrTimeout) {
				return a.silent(err)
			}
			if cause != nil {
				return nil // cancelled: the caller ends the run
			}
			if agents.Refused(err) {
				// The log refused the events (too large, invalid): what
				// the upstream sent.
				return fail(CodeUpstreamError, "The AG-UI agent sent an event Tether could not store ("+string(tether.CodeOf(err))+").", err)
			}
			// The store did not take them, though the transport sent
			// them again while it could (agents/runner: while the lease
			// lasts; it then ends ctx): not the upstream's doing. Whether
			// they landed is unknown; the run ends, and the transport
			// sends them again before its run.finished.
			return fail(CodeStoreError, "Tether could not store the run's events ("+string(tether.CodeOf(err))+"); the run was stopped.", err)
		}
	}
	err = <-readErr
	switch {
	case errors.Is(err, errEnded):
		return nil
	case errors.Is(context.Cause(ctx), idle.ErrTimeout):
		return a.silent(err)
	case ctx.Err() != nil:
		return nil // cancelled: the caller ends the run
	case mapping.IsMalformed(err):
		return fail(CodeUpstreamError, "The AG-UI agent sent "+err.Error()+".", err)
	case errors.Is(err, errFrameTooLarge):
		return fail(CodeUpstreamError, "The AG-UI agent sent "+err.Error()+".", err)
	case err != nil:
		return fail(CodeUpstreamDisconnected, "The connection to the AG-UI agent dropped before the run finished.", err)
	}
	return fail(CodeUpstreamDisconnected, "The AG-UI agent's stream ended before the run finished.", errors.New("no RUN_FINISHED"))
}

// silent is the failure of an upstream that sent nothing for the idle
// timeout.
func (a *Agent) silent(cause error) *failure {
	return fail(CodeUpstreamDisconnected, fmt.Sprintf("The AG-UI agent sent nothing for %s; the request was closed.", a.opts.IdleTimeout), cause)
}

// errEnded stops the reader once the upstream run ended: what follows is
// not read.
var errEnded = errors.New("run ended")

// drain adds the batches already waiting to evs, up to maxBatch events
// or maxBatchBytes of JSON.
func drain(evs []*tether.Event, batches <-chan []*tether.Event) []*tether.Event {
	n := jsonSize(evs)
	for len(evs) < maxBatch && n < maxBatchBytes {
		select {
		case more, ok := <-batches:
			if !ok {
				return evs
			}
			evs = append(evs, more...)
			n += jsonSize(more)
		default:
			return evs
		}
	}
	return evs
}

// jsonSize is the size of the events' JSON, about what an append of them
// takes in the store.
func jsonSize(evs []*tether.Event) int {
	n := 0
	for _, e := range evs {
		b, _ := json.Marshal(e)
		n += len(b)
	}
	return n
}

// emit appends evs in order. A batch the store refuses as too large, of
// which nothing was written, is appended in halves, down to single events:
// what the upstream sent fits as long as each event does, whatever the
// store's limit on one commit. An event too large on its own is refused.
func emit(ctx context.Context, s *agents.Session, evs []*tether.Event) error {
	// Copies: the engine sets fields (ts) of what it is given, which it
	// refuses when sent again.
	sent := make([]*tether.Event, len(evs))
	for i, e := range evs {
		c := *e
		sent[i] = &c
	}
	err := s.Emit(ctx, sent...)
	if len(evs) < 2 || tether.CodeOf(err) != tether.CodeTooLarge {
		return err
	}
	half := len(evs) / 2
	if err := emit(ctx, s, evs[:half]); err != nil {
		return err
	}
	return emit(ctx, s, evs[half:])
}

// maxCoalesced bounds a delta made of several, well under the size of an
// event.
const maxCoalesced = 64 << 10

// coalesce joins consecutive deltas of the same message (and tool call)
// into one event: a fast upstream costs one event per append, not per
// token.
func coalesce(evs []*tether.Event) []*tether.Event {
	out := evs[:0:0]
	for _, e := range evs {
		if n := len(out); n > 0 {
			p := out[n-1]
			if p.Type == e.Type && p.MessageID == e.MessageID && p.CallID == e.CallID &&
				(e.Type == tether.EventTextDelta || e.Type == tether.EventReasoningDelta || e.Type == tether.EventToolDelta) &&
				len(p.Delta)+len(e.Delta) <= maxCoalesced {
				c := *p
				c.Delta += e.Delta
				out[n-1] = &c
				continue
			}
		}
		out = append(out, e)
	}
	return out
}
