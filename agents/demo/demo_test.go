package demo_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tetherhq/tether/agents/demo"
)

func TestScriptIsDeterministic(t *testing.T) {
	o, _ := demo.ParseOptions(nil)
	a, b := demo.Script("streams", o), demo.Script("streams", o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same prompt, different script")
	}
	if c := demo.Script("other prompt", o); reflect.DeepEqual(a.Text, c.Text) {
		t.Fatal("different prompts, same text")
	}
	if len(a.Text) != demo.DefaultTokens || len(a.Reasoning) == 0 || len(a.ToolInput) == 0 {
		t.Fatalf("shape: %d words, %d reasoning, %d tool deltas", len(a.Text), len(a.Reasoning), len(a.ToolInput))
	}
	var in map[string]string
	if err := json.Unmarshal([]byte(strings.Join(a.ToolInput, "")), &in); err != nil || in["query"] != "streams" {
		t.Fatalf("tool input %q: %v", strings.Join(a.ToolInput, ""), err)
	}
}

func TestParseOptions(t *testing.T) {
	cases := []struct {
		meta       string
		tokens, ms int
		reasoning  bool
		err        bool
	}{
		{``, demo.DefaultTokens, demo.DefaultDelayMs, true, false},
		{`{}`, demo.DefaultTokens, demo.DefaultDelayMs, true, false},
		{`{"demo":{"tokens":500}}`, 500, demo.DefaultDelayMs, true, false},
		{`{"demo":{"tokens":0,"delay_ms":0,"reasoning":false}}`, 0, 0, false, false},
		{`{"demo":{"tokens":-1}}`, 0, 0, false, true},
		{`{"demo":{"delay_ms":999999}}`, 0, 0, false, true},
		{`{"demo":{"tokens":"many"}}`, 0, 0, false, true},
	}
	for _, c := range cases {
		o, err := demo.ParseOptions(json.RawMessage(c.meta))
		if (err != nil) != c.err {
			t.Fatalf("%s: err %v", c.meta, err)
		}
		if c.err {
			continue
		}
		s := demo.Script("x", o)
		if o.Tokens != c.tokens || o.DelayMs != c.ms || (len(s.Reasoning) > 0) != c.reasoning {
			t.Fatalf("%s: %+v", c.meta, o)
		}
	}
}

func TestScriptEndsOnAFullStop(t *testing.T) {
	for _, n := range []int{1, 7, 13, 80, 501} {
		s := demo.Script("why", demo.Options{Tokens: n})
		if last := s.Text[len(s.Text)-1]; !strings.HasSuffix(last, ".") || len(s.Text) != n {
			t.Fatalf("%d tokens: %d words ending %q", n, len(s.Text), last)
		}
	}
}

// sentences splits words into sentences at the words that end one.
func sentences(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range words {
		cur = append(cur, w)
		if strings.HasSuffix(strings.TrimSpace(w), ".") {
			out = append(out, cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// dangling are words a complete sentence does not end on.
var dangling = map[string]bool{"the": true, "a": true, "an": true, "on": true, "of": true, "to": true, "in": true, "that": true,
	"is": true, "and": true, "or": true, "for": true, "with": true, "at": true, "by": true, "from": true, "as": true,
	"which": true, "so": true, "depends": true}

// The answers read as finished prose: complete sentences (a capital first,
// a full stop last, no dangling last word), none said twice, in the text
// and in the reasoning, whatever the length. ("…it depends on." and
// repeated sentences made people think the demo was broken.)
func TestSentencesAreCompleteAndNeverRepeat(t *testing.T) {
	for _, prompt := range []string{"what is a durable stream?", "why", "", strings.Repeat("a very long question ", 10)} {
		for _, n := range []int{1, 2, 3, 5, 9, 14, 15, 16, 17, 23, 40, 80, 81, 200, 1000, 5000} {
			s := demo.Script(prompt, demo.Options{Tokens: n})
			for part, words := range map[string][]string{"text": s.Text, "reasoning": s.Reasoning} {
				seen := map[string]bool{}
				for _, sent := range sentences(words) {
					line := strings.TrimSpace(strings.Join(sent, " "))
					first, last := []rune(line)[0], strings.TrimSuffix(strings.TrimSpace(sent[len(sent)-1]), ".")
					if !strings.HasSuffix(line, ".") || !(first >= 'A' && first <= 'Z') || dangling[strings.ToLower(last)] {
						t.Fatalf("%q, %d words, %s: incomplete sentence %q", prompt, n, part, line)
					}
					if seen[line] {
						t.Fatalf("%q, %d words, %s: %q twice", prompt, n, part, line)
					}
					seen[line] = true
				}
			}
			if len(s.Text) != n {
				t.Fatalf("%d tokens: %d words", n, len(s.Text))
			}
		}
	}
}

// A seed picks the sentences: the same seed gives the same answer, another
// seed another.
func TestSeed(t *testing.T) {
	seed := func(v uint64) *uint64 { return &v }
	o, err := demo.ParseOptions(json.RawMessage(`{"demo":{"tokens":60,"seed":7}}`))
	if err != nil || o.Seed == nil || *o.Seed != 7 {
		t.Fatalf("parse: %+v, %v", o, err)
	}
	a, b := demo.Script("q", o), demo.Script("q", demo.Options{Tokens: 60, Seed: seed(7)})
	c := demo.Script("q", demo.Options{Tokens: 60, Seed: seed(8)})
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a.Text, c.Text) {
		t.Fatal("a seed does not decide the text")
	}
}
