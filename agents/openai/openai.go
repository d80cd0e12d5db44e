package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/internal/idle"
)

// Name is the agent's name.
const Name = "openai"

// DefaultBaseURL is OpenAI's API, the usual default for
// --openai-base-url.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configure the agent. BaseURL is required, and Model unless every
// run names one.
type Options struct {
	// BaseURL is the API's base, to which "/chat/completions" is added,
	// e.g. https://api.openai.com/v1 or http://localhost:11434/v1. A
	// query (?api-version=…) is kept.
	BaseURL string
	// Model is the model of runs that name none in metadata.openai.model.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>"; no header if empty.
	APIKey string
	// HTTPClient sends the requests. Defaults to a client with no overall
	// timeout (answers stream for minutes) and a 30s timeout for the
	// response headers.
	HTTPClient *http.Client
	// SystemPrompt, if set, is sent as a system message before the
	// conversation.
	SystemPrompt string
	// MaxRetries is how often a request is tried again after HTTP 408,
	// 429 or 5xx, a connection error, or a stream that ended before any
	// output; never once something was streamed. Pauses follow the
	// provider's Retry-After, capped at 10s, else grow from 0.5s.
	// Defaults to 2; a negative value means no retries. At most 10.
	MaxRetries int
	// FlushInterval is how long deltas are collected before they are
	// appended, in one append (also when 64 events are waiting), so that
	// a fast model does not cost an append per token. Defaults to 50ms; a
	// negative value appends the events of each chunk at once.
	FlushInterval time.Duration
	// IdleTimeout is how long the provider may send nothing at all (not a
	// byte: keep-alive comments count) once it answered, before the
	// request is abandoned and the run ends error (upstream_disconnected,
	// not retried). Defaults to DefaultIdleTimeout; a negative value means
	// no bound.
	IdleTimeout time.Duration
	// Logger receives a warning for each failed request (status, the
	// provider's error type, never its message or the key). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// DefaultIdleTimeout is the default Options.IdleTimeout: 10 minutes, the
// read timeout of OpenAI's own SDKs. Reasoning models can think for
// minutes before their first token, and most providers send nothing
// meanwhile, so a tighter bound would fail runs that were going well.
const DefaultIdleTimeout = 10 * time.Minute

// Defaults and limits of Options.
const (
	defaultMaxRetries    = 2
	maxMaxRetries        = 10
	defaultFlushInterval = 50 * time.Millisecond
	headerTimeout        = 30 * time.Second
	// maxBatch is how many events wait at most before an append.
	maxBatch = 64
)

// Agent streams the answers of an OpenAI-compatible chat completions API.
// It is safe for concurrent use: the runner gives it many runs at once.
type Agent struct {
	opts   Options
	url    string
	client *http.Client
	log    *slog.Logger

	// Retry pauses; tests shorten them.
	retryBase time.Duration
	retryCap  time.Duration
	sleep     func(ctx context.Context, d time.Duration) error
}

var _ agents.Agent = (*Agent)(nil)

// New returns the agent, or an error that says which option is wrong.
func New(opts Options) (*Agent, error) {
	if opts.BaseURL == "" {
		return nil, errors.New("openai: the base URL is required")
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		return nil, fmt.Errorf("openai: the base URL must be an http or https URL without a fragment, got %q", redacted(opts.BaseURL))
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/chat/completions"
	u.RawPath = ""
	if len(opts.Model) > maxModelLen {
		return nil, fmt.Errorf("openai: the model name is longer than %d bytes", maxModelLen)
	}
	for _, r := range opts.APIKey {
		if r <= ' ' || r == 0x7f {
			// Not quoted: it is a secret.
			return nil, errors.New("openai: the API key contains a space or a control character (a trailing newline?)")
		}
	}
	switch {
	case opts.MaxRetries == 0:
		opts.MaxRetries = defaultMaxRetries
	case opts.MaxRetries < 0:
		opts.MaxRetries = 0
	case opts.MaxRetries > maxMaxRetries:
		return nil, fmt.Errorf("openai: MaxRetries must be at most %d", maxMaxRetries)
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = defaultFlushInterval
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = headerTimeout
		opts.HTTPClient = &http.Client{Transport: tr}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Agent{
		opts:      opts,
		url:       u.String(),
		client:    opts.HTTPClient,
		log:       opts.Logger,
		retryBase: 500 * time.Millisecond,
		retryCap:  10 * time.Second,
		sleep:     sleep,
	}, nil
}

// redacted returns a URL without its password, for messages.
func redacted(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

// Run answers a run: it sends the conversation to the provider and streams
// the answer into one assistant message. Bad metadata.openai, and failures
// of the provider, end the run error with a code of this package (see
// CodeBadOptions); Run then returns nil. It returns ctx's error when ctx
// ends, and the Session's error when an append fails.
func (a *Agent) Run(ctx context.Context, s *agents.Session) error {
	ro, err := parseRunOptions(s.Run.Metadata, a.opts.Model)
	if err != nil {
		return s.Finish(ctx, tether.RunError, &tether.ErrorInfo{Code: CodeBadOptions, Message: err.Error()})
	}
	body, err := json.Marshal(newRequest(ro, a.opts.SystemPrompt, s.Messages))
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	log := a.log.With("agent", Name, "run", s.Run.ID, "model", ro.model)
	st := &stream{a: a, s: s, ans: newAnswer(s.NewMessageID)}
	for n := 0; ; n++ {
		err := st.attempt(ctx, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			st.save(ctx)
			return ctx.Err()
		}
		var f *failure
		if !errors.As(err, &f) {
			return err
		}
		retry := f.retry && !st.ans.started() && n < a.opts.MaxRetries
		attrs := []any{"code", f.info.Code, "attempt", n + 1, "retry", retry}
		if f.status != 0 {
			attrs = append(attrs, "status", f.status)
		}
		if f.kind != "" {
			attrs = append(attrs, "provider_error", f.kind)
		}
		if f.cause != nil {
			attrs = append(attrs, "err", f.cause)
		}
		log.Warn("model provider failed", attrs...)
		if !retry {
			return st.fail(ctx, f)
		}
		if err := a.sleep(ctx, a.backoff(n, f.wait)); err != nil {
			return err
		}
	}
}

// stream is the answer of one run as it streams: the events not yet
// appended wait in pending.
type stream struct {
	a       *Agent
	s       *agents.Session
	ans     *answer
	pending []*tether.Event
}

// item is what the body reader hands over: a chunk, the end, or an error.
type item struct {
	c    *chunk
	done bool // data: [DONE]
	err  error
}

// attempt sends the request and streams the answer. It returns nil once
// the run is finished done, a *failure, ctx's error, or an append's error.
func (st *stream) attempt(ctx context.Context, body []byte) error {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := st.a.send(rctx, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rbody := idle.New(resp.Body, st.a.opts.IdleTimeout, cancel)
	defer rbody.Stop()

	// The body is read by its own goroutine so that deltas are appended
	// on time while the provider is silent.
	items := make(chan item)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // unblocks the reader before the Wait
	wg.Go(func() { read(rctx, rbody, items) })

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	for {
		select {
		case it := <-items:
			bad := errors.Is(it.err, errMalformed) || errors.Is(it.err, errLineTooLong)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case it.err != nil && errors.Is(context.Cause(rctx), idle.ErrTimeout):
				return silent(st.a.opts.IdleTimeout)
			case it.done, it.err != nil && !bad && st.ans.complete():
				// After a finish_reason only the usage can be missing.
				return st.complete(ctx)
			case bad:
				return malformed(it.err)
			case it.err != nil:
				return disconnected(it.err)
			}
			var err error
			if st.pending, err = st.ans.add(it.c, st.pending); err != nil {
				if errors.Is(err, errStreamError) {
					return streamError(err)
				}
				return malformed(err)
			}
			switch {
			case len(st.pending) == 0:
			case len(st.pending) >= maxBatch || st.a.opts.FlushInterval < 0:
				timer.Stop()
				armed = false
				if err := st.flush(ctx); err != nil {
					return err
				}
			case !armed:
				timer.Reset(st.a.opts.FlushInterval)
				armed = true
			}
		case <-timer.C:
			armed = false
			if err := st.flush(ctx); err != nil {
				return err
			}
		case <-rctx.Done():
			// The reader may have stopped without handing over its error.
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return silent(st.a.opts.IdleTimeout)
		}
	}
}

// read reads the event stream of body into items until the stream ends,
// fails, or ctx ends.
func read(ctx context.Context, body io.Reader, items chan<- item) {
	sr := newSSEReader(body)
	for {
		var it item
		data, err := sr.next()
		switch {
		case err != nil:
			it.err = err
		case string(data) == "[DONE]":
			it.done = true
		default:
			it.c, it.err = parseChunk(data)
		}
		select {
		case items <- it:
		case <-ctx.Done():
			return
		}
		if it.done || it.err != nil {
			return
		}
	}
}

func (st *stream) flush(ctx context.Context) error {
	if len(st.pending) == 0 {
		return nil
	}
	evs := st.pending
	st.pending = nil
	return st.s.Emit(ctx, evs...)
}

// complete ends the message done and the run done, with what is pending,
// in one append.
func (st *stream) complete(ctx context.Context) error {
	evs := st.ans.end(st.pending)
	evs = append(evs, &tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)})
	st.pending = nil
	return st.s.Emit(ctx, evs...)
}

// fail ends the message, if any, and the run error, with what is pending,
// in one append.
func (st *stream) fail(ctx context.Context, f *failure) error {
	evs := st.pending
	st.pending = nil
	if st.ans.started() {
		evs = append(evs, &tether.Event{Type: tether.EventMessageFinished, MessageID: st.ans.msg, Status: string(tether.MessageError)})
	}
	info, err := json.Marshal(f.info)
	if err != nil {
		return err
	}
	evs = append(evs, &tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunError), Error: info})
	return st.s.Emit(ctx, evs...)
}

// save appends what is pending after ctx ended, so that the log keeps all
// that was streamed before a cancel. The run may have ended already (then
// the append is refused, and that is fine).
func (st *stream) save(ctx context.Context) {
	if len(st.pending) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = st.flush(sctx)
}
