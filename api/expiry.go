package api

import (
	"context"
	"time"
)

// Streams end at the exp of the token they were opened with (reason
// token_expired), never silently outliving it: the client fetches a fresh
// token and resumes from its offset. They check on the streams' beat
// (beat.go), so they end at most a beat after exp. Requests get the
// token's leeway on exp; streams do not.

// expired reports whether a token with this exp has expired by the
// server's clock (Options.Tokens.Now). A zero exp never does.
func (s *Server) expired(exp time.Time) bool {
	return !exp.IsZero() && !s.opts.Tokens.Now().Before(exp)
}

// expiry returns a channel closed once p's token has expired, or nil
// (never ready) for a principal without exp. It watches until ctx ends.
func (s *Server) expiry(ctx context.Context, p Principal) <-chan struct{} {
	if p.Expires.IsZero() {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		for !s.expired(p.Expires) {
			select {
			case <-ctx.Done():
				return
			case <-s.beat.next():
			}
		}
		close(ch)
	}()
	return ch
}

// lapsed reports whether p's token no longer admits a stream: a signed
// token past its exp, or a static key a reload removed (held).
func (s *Server) lapsed(p Principal) bool {
	return s.expired(p.Expires) || !s.held(p)
}

// untilExpiry bounds a long poll's wait by the token's exp: a wait never
// outlasts it, and answers what it has then.
func (s *Server) untilExpiry(wait time.Duration, exp time.Time) time.Duration {
	if exp.IsZero() {
		return wait
	}
	return max(min(wait, exp.Sub(s.opts.Tokens.Now())), 0)
}
