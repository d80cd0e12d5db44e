package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
)

// Limits of the per-run options.
const (
	maxModelLen  = 256
	maxMaxTokens = 1 << 24
)

// runOptions are what a run asks for in metadata.openai, over the agent's
// defaults.
type runOptions struct {
	model       string
	temperature *float64
	maxTokens   *int
}

// parseRunOptions reads metadata.openai from a run's metadata. Its errors
// are shown to clients as they are.
func parseRunOptions(metadata json.RawMessage, model string) (runOptions, error) {
	o := runOptions{model: model}
	var meta map[string]json.RawMessage
	if len(metadata) > 0 && json.Unmarshal(metadata, &meta) != nil {
		return o, errors.New("metadata must be a JSON object")
	}
	raw := bytes.TrimSpace(meta[Name])
	if len(raw) == 0 || string(raw) == "null" {
		return o, o.check()
	}
	var m struct {
		Model       *string  `json:"model"`
		Temperature *float64 `json:"temperature"`
		MaxTokens   *float64 `json:"max_tokens"`
	}
	if raw[0] != '{' {
		return o, errors.New("metadata.openai must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		msg := tether.JSONError(err)
		if strings.HasPrefix(msg, "unknown field") {
			msg += " (known: model, temperature, max_tokens)"
		}
		return o, fmt.Errorf("metadata.openai: %s", msg)
	}
	if m.Model != nil {
		if *m.Model == "" || len(*m.Model) > maxModelLen {
			return o, fmt.Errorf("metadata.openai.model must be a string of 1 to %d bytes", maxModelLen)
		}
		o.model = *m.Model
	}
	if m.Temperature != nil {
		if t := *m.Temperature; math.IsNaN(t) || t < 0 || t > 2 {
			return o, errors.New("metadata.openai.temperature must be a number from 0 to 2")
		}
		o.temperature = m.Temperature
	}
	if m.MaxTokens != nil {
		f := *m.MaxTokens
		if f != math.Trunc(f) || f < 1 || f > maxMaxTokens {
			return o, fmt.Errorf("metadata.openai.max_tokens must be a whole number from 1 to %d", maxMaxTokens)
		}
		n := int(f)
		o.maxTokens = &n
	}
	return o, o.check()
}

func (o runOptions) check() error {
	if o.model == "" {
		return errors.New("no model is set for this run: set metadata.openai.model, or a default model on the server (--openai-model)")
	}
	return nil
}

// request is the body of POST /chat/completions.
type request struct {
	Model         string        `json:"model"`
	Messages      []message     `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	Temperature   *float64      `json:"temperature,omitempty"`
	MaxTokens     *int          `json:"max_tokens,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type message struct {
	Role    tether.Role `json:"role"`
	Content string      `json:"content"`
}

// newRequest returns the request for a run: the system prompt, then the
// text of the conversation's messages. Reasoning and tool parts are not
// sent, and messages without text are left out.
func newRequest(o runOptions, system string, conv []tether.Message) *request {
	r := &request{Model: o.model, Stream: true, StreamOptions: streamOptions{IncludeUsage: true},
		Temperature: o.temperature, MaxTokens: o.maxTokens, Messages: make([]message, 0, len(conv)+1)}
	if system != "" {
		r.Messages = append(r.Messages, message{Role: tether.RoleSystem, Content: system})
	}
	for _, m := range conv {
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == tether.PartText {
				b.WriteString(p.Text)
			}
		}
		if b.Len() == 0 || !m.Role.Valid() {
			continue
		}
		r.Messages = append(r.Messages, message{Role: m.Role, Content: b.String()})
	}
	return r
}

// maxErrorBody is how much of a non-2xx answer is read: enough for the
// provider's error type, and to reuse the connection.
const maxErrorBody = 64 << 10

// send posts the request. It returns the response of a 2xx answer with an
// event stream, a *failure, or ctx's error.
func (a *Agent) send(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if a.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.opts.APIKey)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A *url.Error names the URL, which may hold a key in its query.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, unreachable(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		f := statusFailure(resp.StatusCode, retryAfter(resp.Header, time.Now()))
		f.kind = errorKind(b)
		return nil, f
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt == "application/json" {
			resp.Body.Close()
			return nil, notStreamed(mt)
		}
	}
	return resp, nil
}

// errorKind returns the provider's error type and code from an error body
// ({"error": {"type": …, "code": …}}), for the log. The message is left
// out: providers quote the request in it, and masked keys.
func errorKind(body []byte) string {
	var e struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	kind := e.Error.Type
	var code string
	if json.Unmarshal(e.Error.Code, &code) != nil {
		code = strings.Trim(string(e.Error.Code), `"`)
	}
	if code != "" && code != "null" && code != kind {
		if kind != "" {
			kind += "/"
		}
		kind += code
	}
	if len(kind) > 80 {
		kind = kind[:80]
	}
	return kind
}

// retryAfter reads how long the provider asks to wait: retry-after-ms
// (OpenAI's), or Retry-After in seconds or as an HTTP date. It returns 0 if
// it says nothing usable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e6 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is the pause before retry n (0 for the first): the provider's
// Retry-After if it gave one, else an exponential backoff with jitter;
// capped at the agent's retry cap either way.
func (a *Agent) backoff(n int, wait time.Duration) time.Duration {
	if wait <= 0 {
		wait = a.retryBase << min(n, 10)
		wait += time.Duration(rand.Int64N(int64(wait)/2 + 1))
	}
	return min(wait, a.retryCap)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
