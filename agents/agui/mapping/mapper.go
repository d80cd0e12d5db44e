package mapping

import (
	"encoding/json"
	"strconv"

	tether "github.com/tetherhq/tether"
)

// Options configure a Mapper.
type Options struct {
	// RunID is the Tether run the events are for: ids the Mapper makes
	// start with it. Required.
	RunID string
	// Taken reports whether an id is already used in the thread, by a
	// message or a tool call (of an earlier run, or the run's input): an
	// upstream message or tool call id that is taken, or not a valid
	// Tether id, is replaced by one the Mapper makes. AG-UI names a call
	// by its id alone, so a call id reused in a later run (models that
	// number their calls do) would be another call's. Defaults to none
	// taken.
	Taken func(id string) bool
	// State is the thread's state when the run started (nil for null):
	// the Mapper follows it through the upstream's STATE_SNAPSHOT and
	// STATE_DELTA events (see State).
	State json.RawMessage
	// Sent is the state the upstream is given while State is null (the
	// front end's, or {}): AG-UI agents patch the state of their input,
	// so a STATE_DELTA before any STATE_SNAPSHOT applies to it, and it
	// is set (state.snapshot) first. Ignored if State is set.
	Sent json.RawMessage
}

// Mapper maps the AG-UI events of one Tether run. See the package doc.
type Mapper struct {
	opts Options
	seq  int

	started bool // RUN_STARTED of the current stream seen
	ended   bool // RUN_FINISHED or RUN_ERROR of the current stream seen
	waiting *tether.Request
	asked   map[string]bool // the run's request ids so far

	ids   map[string]string // upstream message id → Tether message id
	msgs  map[string]*message
	order []*message       // messages of the run, in start order
	open  []*message       // those not finished (message.finished not sent)
	calls map[string]*call // upstream tool call id → call
	// lastText and lastReasoning are the messages _CHUNK events without a
	// messageId continue.
	lastText, lastReasoning, lastCall string

	state json.RawMessage
	// base is Options.Sent until the upstream's first state event: what
	// a STATE_DELTA then applies to.
	base json.RawMessage
}

// New returns a Mapper for one Tether run.
func New(opts Options) *Mapper {
	if opts.Taken == nil {
		opts.Taken = func(string) bool { return false }
	}
	return &Mapper{
		opts:  opts,
		ids:   make(map[string]string),
		msgs:  make(map[string]*message),
		calls: make(map[string]*call),
		asked: make(map[string]bool),
		state: opts.State,
		base:  opts.Sent,
	}
}

// Ended reports whether the current stream's run ended (RUN_FINISHED or
// RUN_ERROR): nothing more may come in this stream.
func (m *Mapper) Ended() bool { return m.ended }

// Waiting returns the request of a run that ended with an interrupt, nil
// otherwise. Its answer is sent upstream as resume[] with Resume.
func (m *Mapper) Waiting() *tether.Request { return m.waiting }

// Resume prepares the Mapper for the next stream of the same Tether run,
// the one that answers an interrupt: it must start with RUN_STARTED.
func (m *Mapper) Resume() {
	m.started, m.ended, m.waiting = false, false, nil
}

// State returns the thread's state as the upstream left it (nil for
// null): the run's starting state with its STATE_SNAPSHOT and STATE_DELTA
// events applied.
func (m *Mapper) State() json.RawMessage { return m.state }

// newID makes an id unique in the run: the run's id, a kind letter, a
// counter.
func (m *Mapper) newID(kind string) string {
	m.seq++
	return m.opts.RunID + "-" + kind + strconv.Itoa(m.seq)
}

// tetherID is the Tether id of a new message the upstream names up: up
// itself if it is a valid id used nowhere else, else a new one.
func (m *Mapper) tetherID(up string) string {
	if tether.ValidID(up) && !m.opts.Taken(up) && m.msgs[up] == nil {
		return up
	}
	return m.newID("m")
}
