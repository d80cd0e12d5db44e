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
