package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The token flags: a secret file (whitespace trimmed, at least 32 bytes),
// PEM public keys, a JWKS URL, and issuer or audience only with a key;
// anything else is refused at start with the flag's name.
func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	pub := write("pub.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))

	o, err := loadTokens(tokenFlags{secretFile: write("secret", strings.Repeat("s", 32)+"\n\n"), publicKeys: []string{pub}, audience: "app"})
	if err != nil || string(o.Secret) != strings.Repeat("s", 32) || len(o.PublicKeys) != 1 || o.Audience != "app" || !o.Enabled() {
		t.Fatalf("good flags: %+v %v", o, err)
	}
	for name, f := range map[string]tokenFlags{
		"--jwt-secret-file": {secretFile: write("short", strings.Repeat("s", 31)+"   \n")},
		"--jwt-public-key":  {publicKeys: []string{write("not.pem", "hello")}},
		"--jwks-url":        {jwksURL: "file:///etc/passwd"},
		"--jwt-issuer":      {issuer: "me"},
	} {
		if _, err := loadTokens(f); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := loadTokens(tokenFlags{secretFile: filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing secret file was accepted")
	}
}
