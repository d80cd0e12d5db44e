package demo

import (
	"math/rand/v2"
	"strings"
)

// The demo agent writes complete sentences from a fixed vocabulary, so that
// an answer of any length reads as finished prose: every sentence ends
// where it should, and none is said twice in a run.
//
// A sentence is an optional opener, a subject, a verb, an object and an
// optional tail, ending with a full stop: 5 to maxLen (14) words, any
// length in between. Sentences of 1 to 4 words are whole short ones. Filling exactly
// n words (metadata.demo.tokens) picks lengths so that the last sentence
// ends on the last word.

// grammar is one voice: the answer's, or the reasoning's (first person).
// Openers, tails and short sentences are sorted by their length in words
// when the package loads (byLen), so a sentence of any length can be made.
type grammar struct {
	openers  []string // none to two words
	subjects []string // two words each
	verbs    []string // one word each
	objects  []string // two words each
	tails    []string // none to maxTail words
	short    []string // whole sentences of 1 to coreLen-1 words

	openersBy, tailsBy, shortBy map[int][]string
}

const (
	coreLen   = 5 // subject, verb, object
	maxOpener = 2
	maxTail   = 9
	maxLen    = coreLen + maxTail
)

func byLen(list []string) map[int][]string {
	m := map[int][]string{}
	for _, s := range list {
		n := len(strings.Fields(s))
		m[n] = append(m[n], s)
	}
	return m
}

func (g *grammar) index() *grammar {
	g.openersBy, g.tailsBy, g.shortBy = byLen(g.openers), byLen(g.tails), byLen(g.short)
	return g
}

var tails = []string{
	"",
	"reliably", "quietly", "carefully", "locally", "cheaply", "safely", "precisely", "consistently",
	"in order", "without gaps", "over time", "by design", "for later", "at once", "in memory", "on disk",
	"for later readers", "across every restart", "with little overhead", "in one place", "under heavy load", "at every step", "for each client", "from the start",
	"even after a crash", "so nothing is lost", "when a connection drops", "before anyone reads it", "in the same order", "for the whole run",
	"for as long as needed", "while the run is still going", "so that nothing gets lost", "while the network is down", "long after the run ends", "in the order it happened",
	"until the client comes back", "no matter how long it takes", "so the next reader can resume", "even when the server restarts twice", "without asking the client to wait", "so that a refresh shows everything",
	"even if the laptop goes to sleep", "so that two workers never collide", "even when two workers race for it", "while a reader catches up from behind",
	"and the page shows exactly the same text", "so that every tab agrees on the answer", "even when the proxy closes the stream early", "so that a late reader sees every word",
	"so a client can pick up where it stopped", "and a stalled stream is noticed within seconds", "even when the proxy closes the stream every minute", "so that a late reader still catches up fast",
}

var answerVoice = (&grammar{
	openers: []string{
		"",
		"Usually,", "Often,", "Meanwhile,", "Still,", "Typically,", "Here,", "Clearly,", "Likewise,",
		"In practice,", "For example,", "In short,", "Over time,", "At scale,", "By design,", "In turn,", "Put simply,",
	},
	subjects: []string{
		"the log", "a worker", "each client", "the server", "a snapshot", "every event", "the stream", "a lease",
		"the reader", "a retry", "the offset", "each run", "the index", "a cursor", "the writer", "the cache",
	},
	verbs: []string{
		"keeps", "records", "orders", "protects", "carries", "names", "checks", "marks",
		"shares", "follows", "holds", "returns", "tracks", "updates", "guards", "replays",
	},
	objects: []string{
		"every step", "the answer", "each change", "its position", "the state", "each request", "the history", "every reader",
		"the result", "each message", "the order", "its progress", "the details", "each token", "the outcome", "the context",
	},
	tails: tails,
	short: []string{
		"Indeed.", "Right.", "Exactly.", "Agreed.", "Precisely.", "Certainly.",
		"Details matter.", "Order matters.", "Results vary.", "Timing matters.", "Retries help.", "Nothing repeats.",
		"Measure it first.", "Keep it simple.", "Test each part.", "Start with data.", "Check the offsets.", "Nothing gets lost.",
		"That is the idea.", "Each step is logged.", "The order stays fixed.", "Every reader catches up.", "The log remembers everything.", "That settles the question.",
	},
}).index()

var reasoningVoice = (&grammar{
	openers: []string{
		"",
		"First,", "Then", "Next,", "Also,", "Finally,", "Meanwhile,", "Afterwards,", "Now",
		"After that,", "To start,", "Before answering,", "If needed,", "At last,", "For safety,", "To check,", "Just then,",
	},
	subjects: []string{
		"I should", "I will", "I can", "I must", "I could", "I might", "let me", "we should",
	},
	verbs: []string{
		"check", "compare", "summarize", "verify", "list", "weigh", "quote", "read",
		"note", "explain", "trace", "confirm", "review", "outline", "test", "order",
	},
	objects: answerVoice.objects,
	tails:   tails,
	short: []string{
		"Okay.", "Good.", "Right.", "Fine.", "Noted.", "Understood.",
		"Makes sense.", "Sounds right.", "Seems fine.", "Looks good.", "Almost done.", "Worth checking.",
		"That looks consistent.", "Keep it short.", "Check that again.", "Nothing is missing.", "This seems right.", "Good enough now.",
		"That should be enough.", "That covers the question.", "The sources agree here.", "Now I can answer.", "The plan looks solid.", "Nothing else is needed.",
	},
}).index()

// writer draws sentences of a voice, never the same one twice.
type writer struct {
	g    *grammar
	rng  *rand.Rand
	used map[string]bool
}

func newWriter(g *grammar, rng *rand.Rand) *writer {
	return &writer{g: g, rng: rng, used: map[string]bool{}}
}

func (w *writer) pick(list []string) string { return list[w.rng.IntN(len(list))] }

// sentence returns a sentence of exactly n words (1 to maxLen) not used
// before, if the vocabulary has one left: after many tries it accepts a
// repeat rather than loop forever.
func (w *writer) sentence(n int) []string {
	var s string
	for try := 0; try < 200; try++ {
		s = w.draw(n)
		if !w.used[s] {
			break
		}
	}
	w.used[s] = true
	return strings.Fields(s)
}

func (w *writer) draw(n int) string {
	g := w.g
	if n < coreLen {
		return w.pick(g.shortBy[n])
	}
	// An opener of 0 to 2 words and a tail of the rest.
	var openers []int
	for o := 0; o <= maxOpener; o++ {
		if t := n - coreLen - o; len(g.openersBy[o]) > 0 && len(g.tailsBy[t]) > 0 {
			openers = append(openers, o)
		}
	}
	o := openers[w.rng.IntN(len(openers))]
	parts := []string{w.pick(g.openersBy[o]), w.pick(g.subjects), w.pick(g.verbs), w.pick(g.objects), w.pick(g.tailsBy[n-coreLen-o])}
	s := strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
	return capitalize(s) + "."
}

// fill returns words that make whole sentences, exactly n of them (after
// the lead sentence, if it fits).
func (w *writer) fill(n int, lead []string) []string {
	var out []string
	if len(lead) > 0 && (len(lead) == n || n-len(lead) >= 3) {
		out = append(out, lead...)
		n -= len(lead)
	}
	for n > 0 {
		if n <= maxLen {
			out = append(out, w.sentence(n)...)
			break
		}
		// A length that leaves either nothing or at least three words, so
		// that the answer does not end on a one-word sentence.
		l := coreLen + w.rng.IntN(maxLen-coreLen+1)
		if r := n - l; r > 0 && r < 3 {
			l -= 3 - r
		}
		out = append(out, w.sentence(l)...)
		n -= l
	}
	return out
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
