// Package demo is Tether's built-in demo agent: deterministic and scripted,
// so that the product runs, and tests and benchmarks have a realistic
// producer, without any model.
//
// For each run it streams one assistant message: a reasoning part, a tool
// call (with its input streamed in pieces and an output, optionally once a
// person approved it), optionally a question to the user (run.waiting),
// then the answer text, one word per text.delta. The same prompt, options
// and answers always give the same events.
//
// The shape and pace are set per run in the run's metadata:
//
//	{"demo": {"tokens": 80, "delay_ms": 30, "reasoning": true, "tool": true, "approve": false, "ask": false, "fail": false, "seed": 7}}
//
// tokens is the number of text.delta events (one word each: the answer is
// exactly that many words of complete sentences, none repeated, ending
// with a full stop); delay_ms the pause before each event; approve makes
// the tool call wait for a person's approval (a request of kind
// "approval": see Approved); ask makes the
// run wait for input (it continues after POST /v1/runs/{id}/input); fail
// ends the run with an error halfway through the text; seed picks the
// sentences (by default the prompt does).
//
// # Caveats
//
// delay_ms applies to every streamed event, so a run takes about
// (tokens + tokens/4 + 6) × delay_ms.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
)

// Name is the agent's name.
const Name = "demo"

// Options are a run's demo settings (metadata.demo).
type Options struct {
	Tokens    int   `json:"tokens"`
	DelayMs   int   `json:"delay_ms"`
	Reasoning *bool `json:"reasoning"`
	Tool      *bool `json:"tool"`
	Approve   bool  `json:"approve"`
	Ask       bool  `json:"ask"`
	Fail      bool  `json:"fail"`
	// Seed picks the sentences; by default it comes from the prompt.
	Seed *uint64 `json:"seed"`
}

// Defaults for Options.
const (
	DefaultTokens  = 80
	DefaultDelayMs = 30
	MaxTokens      = 100000
	MaxDelayMs     = 60000
)

// ParseOptions reads metadata.demo from a run's metadata, with defaults.
func ParseOptions(metadata json.RawMessage) (Options, error) {
	var m struct {
		Demo *Options `json:"demo"`
	}
	o := Options{Tokens: DefaultTokens, DelayMs: DefaultDelayMs}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &m); err != nil {
			return o, fmt.Errorf("metadata.demo: %w", err)
		}
	}
	if m.Demo != nil {
		d := *m.Demo
		if d.Tokens < 0 || d.Tokens > MaxTokens {
			return o, fmt.Errorf("metadata.demo.tokens must be 0 to %d", MaxTokens)
		}
		if d.DelayMs < 0 || d.DelayMs > MaxDelayMs {
			return o, fmt.Errorf("metadata.demo.delay_ms must be 0 to %d", MaxDelayMs)
		}
		if d.Tokens == 0 && !hasKey(metadata, "tokens") {
			d.Tokens = DefaultTokens
		}
		if d.DelayMs == 0 && !hasKey(metadata, "delay_ms") {
			d.DelayMs = DefaultDelayMs
		}
		o = d
	}
	return o, nil
}

func hasKey(metadata json.RawMessage, key string) bool {
	var m struct {
		Demo map[string]json.RawMessage `json:"demo"`
	}
	_ = json.Unmarshal(metadata, &m)
	_, ok := m.Demo[key]
	return ok
}

func (o Options) reasoning() bool { return o.Reasoning == nil || *o.Reasoning }
func (o Options) tool() bool      { return o.Tool == nil || *o.Tool }

// Agent is the demo agent.
type Agent struct{}

// New returns the demo agent.
func New() *Agent { return &Agent{} }

// Run streams the scripted answer.
func (Agent) Run(ctx context.Context, s *agents.Session) error {
	opts, err := ParseOptions(s.Run.Metadata)
	if err != nil {
		return s.Finish(ctx, tether.RunError, &tether.ErrorInfo{Code: "bad_options", Message: err.Error()})
	}
	sc := Script(s.Prompt(), opts)
	pause := func() error {
		if opts.DelayMs == 0 {
			return ctx.Err()
		}
		t := time.NewTimer(time.Duration(opts.DelayMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	msg, err := s.StartMessage(ctx, tether.RoleAssistant)
	if err != nil {
		return err
	}
	for _, d := range sc.Reasoning {
		if err := pause(); err != nil {
			return err
		}
		if err := s.Reasoning(ctx, msg, d); err != nil {
			return err
		}
	}
	denied := false
	if opts.tool() {
		call := msg + "-call1"
		if err := s.ToolStarted(ctx, msg, call, "search"); err != nil {
			return err
		}
		for _, d := range sc.ToolInput {
			if err := pause(); err != nil {
				return err
			}
			if err := s.ToolDelta(ctx, msg, call, d); err != nil {
				return err
			}
		}
		allowed, reason := true, ""
		if opts.Approve {
			if allowed, reason, err = approve(ctx, s, call, sc.ToolInput); err != nil {
				return err
			}
		}
		if err := pause(); err != nil {
			return err
		}
		if !allowed {
			denied = true
			if err := s.ToolFinished(ctx, msg, call, nil, nil, map[string]string{"code": tether.DeniedCode, "message": reason}); err != nil {
				return err
			}
		} else if err := s.ToolFinished(ctx, msg, call, nil, sc.ToolOutput, nil); err != nil {
			return err
		}
	}
	words := sc.Text
	if denied {
		words = append(strings.Fields("You did not allow the search, so this is from what I already know."), words...)
	}
	if opts.Ask {
		v, err := s.Wait(ctx, "input", map[string]string{"prompt": "Which detail should the answer focus on?"})
		if err != nil {
			return err
		}
		prefix := strings.Fields("You asked me to focus on " + quote(answerText(v)) + ".")
		words = append(prefix, words...)
	}
	for i, w := range words {
		if opts.Fail && i == len(words)/2 {
			if err := s.FinishMessage(ctx, msg, tether.MessageError); err != nil {
				return err
			}
			return s.Finish(ctx, tether.RunError, &tether.ErrorInfo{Code: "demo_failure", Message: "The demo agent failed on purpose (metadata.demo.fail)."})
		}
		if err := pause(); err != nil {
			return err
		}
		delta := w
		if i < len(words)-1 {
			delta += " "
		}
		if err := s.Text(ctx, msg, delta); err != nil {
			return err
		}
	}
	if err := s.FinishMessage(ctx, msg, tether.MessageDone); err != nil {
		return err
	}
	return s.Finish(ctx, tether.RunDone, nil)
}

// A Transcript is the scripted content of one demo run.
type Transcript struct {
	Reasoning  []string
	ToolInput  []string
	ToolOutput map[string]any
	Text       []string
}

// Script returns what the demo agent streams for a prompt: deterministic
// for a prompt and options (the seed, if set, else the prompt, picks the
// sentences). The text is exactly o.Tokens words of complete sentences,
// none twice; the reasoning, o.Tokens/4 words (at least one) likewise.
func Script(prompt string, o Options) Transcript {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	seed := h.Sum64()
	if o.Seed != nil {
		seed = *o.Seed
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e7e))
	topic := strings.Join(strings.Fields(prompt), " ")
	if topic == "" {
		topic = "your question"
	}
	if len(topic) > 60 {
		topic = shortTopic(topic)
	}
	var sc Transcript
	if o.reasoning() {
		lead := strings.Fields(fmt.Sprintf("The user asks about %s.", quote(topic)))
		for _, w := range newWriter(reasoningVoice, rng).fill(max(o.Tokens/4, 1), lead) {
			sc.Reasoning = append(sc.Reasoning, w+" ")
		}
	}
	if o.tool() {
		in, _ := json.Marshal(map[string]string{"query": topic})
		s := string(in)
		third := max(len(s)/3, 1)
		for len(s) > 0 {
			n := min(third, len(s))
			sc.ToolInput = append(sc.ToolInput, s[:n])
			s = s[n:]
		}
		sc.ToolOutput = map[string]any{"results": []map[string]string{
			{"title": "Overview of " + topic, "url": "https://example.com/overview"},
			{"title": "Notes on " + topic, "url": "https://example.com/notes"},
		}}
	}
	lead := strings.Fields(fmt.Sprintf("Here is what I found about %s.", quote(topic)))
	sc.Text = newWriter(answerVoice, rng).fill(o.Tokens, lead)
	return sc
}

// shortTopic cuts a long prompt at a word boundary, about 60 bytes.
func shortTopic(t string) string {
	cut := t[:60]
	if i := strings.LastIndexByte(cut, ' '); i > 20 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, ",;:.!? ") + "…"
}

func quote(s string) string { return "\u201c" + s + "\u201d" }

func answerText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var m map[string]any
	if json.Unmarshal(v, &m) == nil {
		for _, k := range []string{"text", "answer", "value"} {
			if s, ok := m[k].(string); ok {
				return s
			}
		}
	}
	return strings.TrimSpace(string(v))
}
