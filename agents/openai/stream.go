package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/nest"
)

// maxLine bounds one line of the provider's event stream, and the data of
// one event (its data lines joined), so that a broken or hostile provider
// cannot make the agent buffer without limit.
const maxLine = 8 << 20

// errLineTooLong is returned by sseReader.next for a line, or the data of
// an event, over maxLine.
var errLineTooLong = errors.New("event stream line too long")

// sseReader reads the data of Server-Sent Events. It follows the SSE
// format as far as a chat completion stream needs: data lines (several are
// joined with "\n") make an event that a blank line ends; comments and the
// other fields (event, id, retry) are ignored.
type sseReader struct {
	r     *bufio.Reader
	data  []byte
	has   bool // the current event has a data line
	first bool // no line read yet (a leading BOM is dropped)
	line  []byte
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), first: true}
}

// next returns the data of the next event. At the end of the body it
// returns the event in progress, if its lines were complete (some servers
// close without the final blank line), then io.EOF; a line cut off by the
// end is dropped. Other errors are the body's, or errLineTooLong (for a
// line or an event's data over maxLine).
func (s *sseReader) next() ([]byte, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && s.has {
				s.has = false
				return s.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if s.has {
				s.has = false
				return s.data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if s.has && len(s.data)+1+len(value) > maxLine {
			return nil, errLineTooLong
		}
		if !s.has {
			s.data = s.data[:0]
			s.has = true
		} else {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
	}
}

// readLine returns the next complete line without its "\n" or "\r\n". The
// line is valid until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.r.ReadSlice('\n')
		s.line = append(s.line, frag...)
		if len(s.line) > maxLine {
			return nil, errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			// A line without its end was cut off: the stream dropped.
			return nil, err
		}
		break
	}
	line := s.line[:len(s.line)-1]
	line = bytes.TrimSuffix(line, []byte("\r"))
	if s.first {
		s.first = false
		line = bytes.TrimPrefix(line, []byte("\ufeff"))
	}
	return line, nil
}

// chunk is one chat.completion.chunk, as far as the agent reads it.
type chunk struct {
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	// Error is set by providers that report a failure inside the stream.
	Error json.RawMessage `json:"error"`
}

type choice struct {
	Index        int    `json:"index"`
	Delta        delta  `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type delta struct {
	// Content is a string, or (with a few providers) an array of parts of
	// which the text ones count.
	Content json.RawMessage `json:"content"`
	// ReasoningContent is DeepSeek's, vLLM's and others' name for reasoning.
	ReasoningContent string `json:"reasoning_content"`
	// Reasoning is OpenRouter's, Ollama's and others' name; only a string
	// counts.
	Reasoning json.RawMessage `json:"reasoning"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// errMalformed is the cause of an upstream_error for a chunk that is not
// valid JSON of the expected shape.
var errMalformed = errors.New("malformed chunk")

// parseChunk decodes the data of one event.
func parseChunk(data []byte) (*chunk, error) {
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: %s", errMalformed, tether.JSONError(err))
	}
	return &c, nil
}

// text returns the text of a content delta.
func (d *delta) text() (string, error) {
	c := bytes.TrimSpace(d.Content)
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", fmt.Errorf("%w: content: %s", errMalformed, tether.JSONError(err))
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", fmt.Errorf("%w: content: %s", errMalformed, tether.JSONError(err))
	}
	var b []byte
	for _, p := range parts {
		if p.Type == "text" {
			b = append(b, p.Text...)
		}
	}
	return string(b), nil
}

// reasoning returns the reasoning of a delta. A provider that sends both
// names sends the same text twice, so reasoning_content wins.
func (d *delta) reasoning() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	var s string
	if len(d.Reasoning) > 0 && d.Reasoning[0] == '"' && json.Unmarshal(d.Reasoning, &s) == nil {
		return s
	}
	return ""
}

// toolCall is a tool call of the answer, by the provider's index.
type toolCall struct {
	id       string // the call_id in Tether
	upstream string // the provider's id, if any
	name     string
	started  bool   // tool.started was sent (it needs the name)
	held     string // arguments received before the name
	args     []byte // all the arguments
}

// maxInput is the size of the largest arguments that tool.finished repeats
// as its input. Larger ones are left to the reducer, which parses the
// streamed input_text the same way: repeating them could take the event
// over the engine's size limit.
const maxInput = 64 << 10

// The sizes of the largest usage object and finish reason the message's
// metadata keeps.
const (
	maxUsage  = 16 << 10
	maxReason = 256
)

// maxToolName bounds a tool's name: models' APIs allow 64 bytes; a longer
// one is the provider's fault, and could take tool.started over the event
// limit.
const maxToolName = 256

// answer turns the chunks of one streamed completion into the events of one
// assistant message. The message starts with its first output.
type answer struct {
	newID func() string

	msg    string // the message's ID, once started
	calls  map[int]*toolCall
	open   []*toolCall // started or waiting for a name, not finished
	ids    map[string]bool
	seq    int
	model  string
	reason string // finish_reason
	usage  json.RawMessage
}

func newAnswer(newID func() string) *answer {
	return &answer{newID: newID, calls: make(map[int]*toolCall), ids: make(map[string]bool)}
}

// started reports whether anything of the answer was emitted.
func (a *answer) started() bool { return a.msg != "" }

// complete reports whether the provider said the answer is complete.
func (a *answer) complete() bool { return a.reason != "" }

func (a *answer) start(out []*tether.Event) []*tether.Event {
	if a.msg != "" {
		return out
	}
	a.msg = a.newID()
	return append(out, &tether.Event{Type: tether.EventMessageStarted, MessageID: a.msg, Role: tether.RoleAssistant})
}

// errStreamError is the cause of an upstream_error for a provider that
// reported an error inside the stream.
var errStreamError = errors.New("the provider reported an error in the stream")

// add appends the events of one chunk to out.
func (a *answer) add(c *chunk, out []*tether.Event) ([]*tether.Event, error) {
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return out, errStreamError
	}
	// The model and the usage go into the message's metadata at the end,
	// in the append that finishes the run: larger than any provider's,
	// they are left out rather than take the answer over the event limit;
	// so is a usage the log would refuse (not UTF-8, nested too deep: the
	// usage is kept as it came, unlike the decoded strings).
	if c.Model != "" && len(c.Model) <= maxModelLen {
		a.model = c.Model
	}
	if len(c.Usage) > 0 && c.Usage[0] == '{' && len(c.Usage) <= maxUsage && nest.Check(c.Usage) == nil {
		a.usage = c.Usage
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		var err error
		if out, err = a.delta(&ch.Delta, out); err != nil {
			return out, err
		}
		switch ch.FinishReason {
		case "":
		case "error":
			return out, errStreamError
		default:
			a.reason = ch.FinishReason
			out = a.finishCalls(out)
		}
	}
	return out, nil
}

func (a *answer) delta(d *delta, out []*tether.Event) ([]*tether.Event, error) {
	if r := d.reasoning(); r != "" {
		out = a.start(out)
		out = append(out, &tether.Event{Type: tether.EventReasoningDelta, MessageID: a.msg, Delta: r})
	}
	text, err := d.text()
	if err != nil {
		return out, err
	}
	if text != "" {
		out = a.start(out)
		out = append(out, &tether.Event{Type: tether.EventTextDelta, MessageID: a.msg, Delta: text})
	}
	for i, tc := range d.ToolCalls {
		idx := i
		if tc.Index != nil {
			idx = *tc.Index
		}
		out = a.start(out)
		c := a.calls[idx]
		// Some servers send every call complete at index 0: a new id at a
		// known index is a new call.
		if c == nil || (tc.ID != "" && c.upstream != "" && tc.ID != c.upstream) {
			c = &toolCall{upstream: tc.ID, id: a.callID(tc.ID)}
			a.calls[idx] = c
			a.open = append(a.open, c)
		}
		if c.name == "" && tc.Function.Name != "" {
			if len(tc.Function.Name) > maxToolName {
				return out, fmt.Errorf("%w: a tool name over %d bytes", errMalformed, maxToolName)
			}
			c.name = tc.Function.Name
		}
		arg := tc.Function.Arguments
		if len(c.args) <= maxInput {
			c.args = append(c.args, arg...)
		}
		if !c.started && c.name != "" {
			c.started = true
			out = append(out, &tether.Event{Type: tether.EventToolStarted, MessageID: a.msg, CallID: c.id, Name: c.name})
			arg, c.held = c.held+arg, ""
		}
		if !c.started {
			// Held until the name comes, then sent in one tool.delta:
			// bounded like the input tool.finished repeats.
			if len(c.held)+len(arg) > maxInput {
				return out, fmt.Errorf("%w: over %d bytes of a tool call's arguments before its name", errMalformed, maxInput)
			}
			c.held += arg
			continue
		}
		if arg != "" {
			out = append(out, &tether.Event{Type: tether.EventToolDelta, MessageID: a.msg, CallID: c.id, Delta: arg})
		}
	}
	return out, nil
}

// callID returns the call_id for a new call: the provider's id if Tether
// can use it and it is new in the message, else one made up.
func (a *answer) callID(upstream string) string {
	id := upstream
	for id == "" || !tether.ValidID(id) || a.ids[id] {
		a.seq++
		id = a.msg + "-call" + strconv.Itoa(a.seq)
	}
	a.ids[id] = true
	return id
}

// finishCalls finishes the open tool calls, in the order they started.
func (a *answer) finishCalls(out []*tether.Event) []*tether.Event {
	for _, c := range a.open {
		if !c.started {
			// The provider never named the tool; keep what it sent.
			c.started = true
			out = append(out, &tether.Event{Type: tether.EventToolStarted, MessageID: a.msg, CallID: c.id, Name: "unknown"})
			if c.held != "" {
				out = append(out, &tether.Event{Type: tether.EventToolDelta, MessageID: a.msg, CallID: c.id, Delta: c.held})
			}
		}
		ev := &tether.Event{Type: tether.EventToolFinished, MessageID: a.msg, CallID: c.id}
		if len(c.args) > 0 && len(c.args) <= maxInput && json.Valid(c.args) {
			ev.Input = json.RawMessage(c.args)
		}
		out = append(out, ev)
	}
	a.open = a.open[:0]
	clear(a.calls)
	return out
}

// end appends the events that complete the answer: the open tool calls
// finish, the message gets its model, finish reason and usage as metadata
// and finishes done.
func (a *answer) end(out []*tether.Event) []*tether.Event {
	out = a.start(out)
	out = a.finishCalls(out)
	meta := map[string]any{}
	if a.model != "" {
		meta["model"] = a.model
	}
	if a.reason != "" && len(a.reason) <= maxReason {
		meta["finish_reason"] = a.reason
	}
	if a.usage != nil {
		meta["usage"] = a.usage
	}
	if len(meta) > 0 {
		b, err := json.Marshal(meta)
		if err == nil {
			out = append(out, &tether.Event{Type: tether.EventMessageUpdated, MessageID: a.msg, Metadata: b})
		}
	}
	return append(out, &tether.Event{Type: tether.EventMessageFinished, MessageID: a.msg, Status: string(tether.MessageDone)})
}
