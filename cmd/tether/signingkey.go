package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/tetherhq/tether/streams/wake"
)

// loadSigningKey reads the key that signs Durable Streams webhook
// notifications (and wake tokens) from file, creating it on first start,
// so that receivers' cached keys and issued tokens survive restarts.
//
// A new key is on disk (written aside, synced, renamed) before anything
// is signed with it. An empty file is what a power loss right after the
// first start of an older build left (created, its data never written):
// no key was ever read from it, so a new one takes its place.
func loadSigningKey(file string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(strings.TrimSpace(string(b))) == 0 {
		key := wake.NewSigningKey()
		enc := base64.StdEncoding.EncodeToString(key.Seed()) + "\n"
		if err := writeFileSynced(file, []byte(enc), 0o600); err != nil {
			return nil, fmt.Errorf("webhook signing key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("webhook signing key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("webhook signing key %s: not a base64 Ed25519 seed", file)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// writeFileSynced writes data to file so that a crash or a power loss
// leaves either no file or the whole of it: it writes a temporary file
// beside it, syncs it, renames it over file and syncs the directory.
func writeFileSynced(file string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(file))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil && runtime.GOOS != "windows" { // Windows cannot sync a directory
		return err
	}
	return nil
}
