package api_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// FuzzParseKeys reads arbitrary keys files. A file is refused with an
// error that names a line and never echoes a token, or accepted with keys
// that each have a known role, a token of at least 16 characters without
// spaces and a name; written back as "role token name" lines, they parse
// to the same keys.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		"admin admin-token-0123456789\n",
		"# comment\n\nclient client-token-0123456789 web\nworker worker-token-0123456789 w1\r\n",
		"client short\n", "root root-token-0123456789\n", "admin a b c d\n", "admin\n",
		"  admin\tadmin-token-0123456789\tops  \n", "admin tok\u00a0en-0123456789abc\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		keys, err := api.ParseKeys(strings.NewReader(file))
		if err != nil {
			msg := err.Error()
			for _, field := range strings.Fields(file) {
				if len(field) >= 16 && strings.Contains(msg, field) {
					t.Fatalf("the error %q echoes %q from the file", msg, field)
				}
			}
			return
		}
		var b strings.Builder
		for _, k := range keys {
			switch k.Role {
			case api.RoleAdmin, api.RoleClient, api.RoleWorker:
			default:
				t.Fatalf("role %q accepted", k.Role)
			}
			if len(k.Token) < 16 || strings.ContainsFunc(k.Token, isSpace) || k.Name == "" || strings.ContainsFunc(k.Name, isSpace) {
				t.Fatalf("key %+v accepted", k)
			}
			b.WriteString(string(k.Role) + " " + k.Token + " " + k.Name + "\n")
		}
		again, err := api.ParseKeys(strings.NewReader(b.String()))
		if err != nil || len(again) != len(keys) {
			t.Fatalf("written back as %q: %d keys, %v", b.String(), len(again), err)
		}
		for i := range keys {
			if again[i] != keys[i] {
				t.Fatalf("key %d: %+v, written back %+v", i, keys[i], again[i])
			}
		}
	})
}

// isSpace is what strings.Fields splits on.
func isSpace(r rune) bool { return len(strings.Fields("a"+string(r)+"b")) == 2 }
