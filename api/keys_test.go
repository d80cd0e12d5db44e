package api_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// A token names one key: the same token on two lines (with two roles, say)
// is refused rather than letting the last line win in silence.
func TestParseKeysRefusesADuplicateToken(t *testing.T) {
	const tok = "shared-token-0123456789"
	_, err := api.ParseKeys(strings.NewReader("client " + tok + " web\n# ops\nadmin " + tok + " ops\n"))
	if err == nil {
		t.Fatal("a keys file with one token on two lines was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "line 3") || !strings.Contains(msg, "line 1") || strings.Contains(msg, tok) {
		t.Fatalf("error %q: want both lines named and the token not echoed", msg)
	}
	keys, err := api.ParseKeys(strings.NewReader("client " + tok + " web\nworker other-token-0123456789 w\n"))
	if err != nil || len(keys) != 2 {
		t.Fatalf("distinct tokens: %v, %v", keys, err)
	}
}

// A keys file saved with a UTF-8 byte order mark (as some editors on
// Windows do) and CRLF line ends is read as the same file without them,
// not refused for a role "\ufeffadmin" that shows as "admin".
func TestParseKeysSkipsAByteOrderMark(t *testing.T) {
	keys, err := api.ParseKeys(strings.NewReader("\ufeffadmin admin-token-0123456789 ops\r\nclient client-token-0123456789\r\n"))
	if err != nil || len(keys) != 2 || keys[0].Role != api.RoleAdmin || keys[0].Token != "admin-token-0123456789" ||
		keys[0].Name != "ops" || keys[1].Token != "client-token-0123456789" {
		t.Fatalf("keys file with a BOM and CRLF: %+v, %v", keys, err)
	}
}
