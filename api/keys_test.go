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
