package main

import (
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
