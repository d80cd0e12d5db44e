package api

import (
	"errors"
	"fmt"
)

// Keys and signing keys change without a restart: tether serve reads its
// keys file and its signed-token files again on SIGHUP and hands them to
// ReloadAuth. A request is judged by the set held when it arrives. A
// stream opened with a static key that the reload removed, or whose role
// it changed, ends as at a token's exp (reason token_expired, held): its
// client reconnects and is refused, rather than reading for as long as
// its connection lasts. Streams of signed tokens end at their own exp.

// ReloadAuth replaces the keys and the signed-token settings. It refuses,
// keeping what it holds, a server started without auth (whether a server
// needs auth decides where it may listen, which a reload cannot change)
// and a set with no key at all (a keys file emptied by mistake must not
// turn auth off), and signed-token settings that every token would fail.
// A JWKS whose URL is unchanged keeps the keys it has fetched.
func (s *Server) ReloadAuth(keys []Key, tokens TokenOptions) error {
	old := s.auth.Load()
	if old == nil {
		return errors.New("auth is off: a server started without keys has none to reload")
	}
	if tokens.Now == nil {
		tokens.Now = s.opts.Tokens.Now
	}
	if tokens.Logger == nil {
		tokens.Logger = s.opts.Tokens.Logger
	}
	a := newAuth(keys, tokens)
	if a == nil {
		return errors.New("no key and no signed-token key: the keys held stay in use")
	}
	if a.jwtErr != nil {
		return fmt.Errorf("signed tokens: %w", a.jwtErr)
	}
	if a.jwt != nil && old.jwt != nil && old.jwt.jwks != nil && a.jwt.opts.JWKSURL == old.jwt.opts.JWKSURL {
		a.jwt.jwks = old.jwt.jwks
	}
	s.auth.Store(a)
	return nil
}

// held reports whether the keys held still admit p as it was admitted: a
// static key still there with the same role. Signed tokens, and every
// principal when auth is off, are judged by their exp alone.
func (s *Server) held(p Principal) bool {
	a := s.auth.Load()
	if a == nil || p.JWT || p.LeaseID == "" {
		return true
	}
	role, ok := a.roles[p.LeaseID]
	return ok && role == p.Role
}
