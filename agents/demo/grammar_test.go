package demo

import (
	"strings"
	"testing"
)

// The vocabulary can make a sentence of every length from 1 to maxLen in
// both voices, in several ways.
func TestGrammarCoversEveryLength(t *testing.T) {
	for name, g := range map[string]*grammar{"answer": answerVoice, "reasoning": reasoningVoice} {
		for n := 1; n < coreLen; n++ {
			if len(g.shortBy[n]) < 3 {
				t.Errorf("%s: %d short sentences of %d words", name, len(g.shortBy[n]), n)
			}
		}
		for t0 := 0; t0 <= maxTail; t0++ {
			if len(g.tailsBy[t0]) < 1 {
				t.Errorf("%s: no tail of %d words", name, t0)
			}
		}
		for o := 0; o <= maxOpener; o++ {
			if len(g.openersBy[o]) < 1 {
				t.Errorf("%s: no opener of %d words", name, o)
			}
		}
		for _, s := range append(append([]string{}, g.subjects...), g.objects...) {
			if len(strings.Fields(s)) != 2 {
				t.Errorf("%s: %q is not two words", name, s)
			}
		}
		for _, s := range g.verbs {
			if len(strings.Fields(s)) != 1 {
				t.Errorf("%s: verb %q", name, s)
			}
		}
		if len(g.tailsBy)-1 != maxTail || len(g.openersBy)-1 != maxOpener {
			t.Errorf("%s: tails up to %d words, openers up to %d", name, len(g.tailsBy)-1, len(g.openersBy)-1)
		}
	}
}
