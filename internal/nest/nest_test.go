package nest

import (
	"strings"
	"testing"
)

func TestDepth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`1`, 0},
		{`"[[["`, 0},
		{`[]`, 1},
		{`{"a":[1,{"b":"]}"}]}`, 3},
		{`[[],[[]]]`, 3},
		{`"\"[["`, 0},
		{strings.Repeat("[", 300) + strings.Repeat("]", 300), 300},
	} {
		if got := Depth([]byte(c.in), 0); got != c.want {
			t.Errorf("Depth(%.40s) = %d, want %d", c.in, got, c.want)
		}
	}
	deep := []byte(strings.Repeat("[", Max+1) + strings.Repeat("]", Max+1))
	if Within(deep, Max) || !Within(deep[1:len(deep)-1], Max) {
		t.Fatal("Within is wrong at the limit")
	}
}

func TestCheck(t *testing.T) {
	deep := strings.Repeat("[", Max+1) + strings.Repeat("]", Max+1)
	for _, c := range []struct {
		in   string
		want error
	}{{`{"a":[1]}`, nil}, {"{\"a\":\"\xff\"}", ErrNotUTF8}, {deep, ErrTooDeep}, {deep[1 : len(deep)-1], nil}} {
		if got := Check([]byte(c.in)); got != c.want {
			t.Errorf("Check(%.20q…) = %v, want %v", c.in, got, c.want)
		}
	}
}
