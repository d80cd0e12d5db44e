package api

import (
	"context"
	"errors"

	tether "github.com/tetherhq/tether"
)

// The AI SDK's chat and AG-UI's run request name a thread that the run
// creates if it is missing. The thread is created only once the request
// is known to be valid (chatThread, then createChatThread), so that a
// refused request writes nothing, as every refused request.

// chatThread returns the snapshot of thread tid as p sees it, or nil
// while it does not exist.
func (s *Server) chatThread(ctx context.Context, p Principal, tid string) (*tether.Snapshot, error) {
	snap, err := s.e.Thread(ctx, tid)
	switch {
	case errors.Is(err, tether.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !p.sees(snap.Thread.Owner, tid):
		return nil, errThreadNotFound(tid) // created by someone else since allowCreate looked
	}
	return snap, nil
}

// createChatThread creates thread tid, which chatThread found missing,
// owned by p, and reports whether it did. One created meanwhile (false)
// must be one p may act on (a).
func (s *Server) createChatThread(ctx context.Context, p Principal, a act, tid string) (created bool, err error) {
	th, created, err := s.e.CreateOwnedThread(ctx, tid, ownerOf(p), nil)
	switch {
	case errors.Is(err, tether.ErrConflict):
		return false, s.allow(ctx, p, a, tid) // it exists, with metadata of its own: whose?
	case err != nil:
		return false, err
	case !created && !p.sees(th.Owner, th.ID):
		return false, errThreadNotFound(th.ID)
	}
	return created, nil
}
