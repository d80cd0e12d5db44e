package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// Every error code of the wire contract (the Code constants of errors.go)
// has a row in docs/protocol.md §1 with the HTTP status the server answers
// it with (statusOf), and every row is a code.
func TestErrorCodesAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| code | HTTP | meaning |")
	if !ok {
		t.Fatal("docs/protocol.md has no table of error codes")
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (\\d{3}) \\|")
	doc := map[string]int{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/protocol.md: error row %q is not | `code` | status |", line)
			continue
		}
		doc[m[1]], _ = strconv.Atoi(m[2])
	}

	f, err := parser.ParseFile(token.NewFileSet(), "../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, e := range v.Values {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					c, _ := strconv.Unquote(lit.Value)
					codes[c] = true
				}
			}
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found %d codes in errors.go", len(codes))
	}
	for c := range codes {
		status, ok := doc[c]
		switch {
		case !ok:
			t.Errorf("the code %s has no row in docs/protocol.md §1", c)
		case status != statusOf(tether.Code(c)):
			t.Errorf("docs/protocol.md §1 gives %s the status %d; the server answers %d", c, status, statusOf(tether.Code(c)))
		}
	}
	for c := range doc {
		if !codes[c] {
			t.Errorf("docs/protocol.md §1 lists %s, which is not a code of errors.go", c)
		}
	}
}
