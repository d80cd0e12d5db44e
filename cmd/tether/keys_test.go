package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --token and the keys file may not give one token twice: it would hold
// two roles.
func TestLoadKeysRefusesTheTokenTwice(t *testing.T) {
	const tok = "admin-token-0123456789"
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("client "+tok+" web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadKeys(serveConfig{token: tok, keysFile: file})
	if err == nil || !strings.Contains(err.Error(), "--token") || strings.Contains(err.Error(), tok) {
		t.Fatalf("--token also in the keys file: %v", err)
	}
	keys, err := loadKeys(serveConfig{token: "other-token-0123456789", keysFile: file})
	if err != nil || len(keys) != 2 {
		t.Fatalf("distinct tokens: %d keys, %v", len(keys), err)
	}
}

// A keys file that holds no key (only comments, or empty: a secret not
// mounted yet) is refused at start: the operator asked for keys, and
// without one the server would run with no auth at all.
func TestServeRefusesAKeysFileWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# keys of the staging server\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a server that starts stops at once
	var stderr strings.Builder
	err := serveCmd(ctx, []string{"--keys", file, "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data")}, noEnv, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("a keys file without keys: %v, want an error saying it holds no key (stderr: %s)", err, stderr.String())
	}
}

func noEnv(string) string { return "" }

// A --token (or $TETHER_TOKEN, say from an env file with CRLF line ends)
// that holds whitespace or a control character is refused at start: no
// client can send it (header values lose their outer spaces, and may not
// hold control characters), so the server would refuse every request.
func TestServeRefusesATokenNoClientCanSend(t *testing.T) {
	for _, tok := range []string{"admin-token-0123456789\r", " admin-token-0123456789", "admin token 0123456789"} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a server that starts stops at once
		env := func(k string) string {
			if k == "TETHER_TOKEN" {
				return tok
			}
			return ""
		}
		var stderr strings.Builder
		err := serveCmd(ctx, []string{"--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data")}, env, io.Discard, &stderr)
		if err != errUsage || !strings.Contains(stderr.String(), "--token") || strings.Contains(stderr.String(), "0123456789") {
			t.Fatalf("token %q: %v, %q: want a usage error naming --token, not echoing it", tok, err, stderr.String())
		}
	}
}
