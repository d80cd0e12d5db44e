package main

import (
	"log/slog"

	"github.com/tetherhq/tether/api"
)

// reloadAuth reads the keys file and the signed-token files again, on
// SIGHUP, so that a key is added, rotated or revoked without a restart
// (docs/operations.md, "Key rotation"). What cannot be read or would turn
// auth off is refused with the reason, and the keys held stay in use: a
// reload never leaves a server with fewer checks than it had.
func reloadAuth(c serveConfig, authOn bool, srv *api.Server, log *slog.Logger) {
	if !authOn {
		log.Warn("SIGHUP: nothing to reload, the server runs without keys")
		return
	}
	keys, err := loadKeys(c)
	if err == nil {
		var tokens api.TokenOptions
		if tokens, err = loadTokens(c.tokens); err == nil {
			if err = srv.ReloadAuth(keys, tokens); err == nil {
				log.Info("keys reloaded", "keys", len(keys), "signed_tokens", tokens.Enabled())
				return
			}
		}
	}
	log.Error("keys not reloaded; the keys held stay in use", "err", err)
}
