package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/streams"
)

// act is what a route does to the thread it names: with the route's
// access, the second column of the route table. It limits only signed
// client tokens (Principal.scoped), whose rights depend on the thread;
// static keys, admins and workers are judged by the role alone.
type act uint8

const (
	// actNone: the route names no thread, or names it in its body or
	// frames and checks it there with allow (POST /v1/ag-ui/{agent}, the AI
	// SDK's chat, the WebSocket's subscribe, the listing's filter).
	actNone act = iota
	// actRead: read or follow the thread; a thread the token may not see
	// is answered not_found, as if it did not exist.
	actRead
	// actCreate: create a thread (the token's create right); one that
	// exists and is not the token's is a conflict.
	actCreate
	// actRun: start a run (the run right).
	actRun
	// actCancel: cancel a run (the cancel right).
	actCancel
	// actAnswer: answer a run's input request (the answer right).
	actAnswer
	// actDelete: delete the thread (any token that sees it).
	actDelete
	// actStream: a Durable Streams path (see allowStream).
	actStream
)

func (a act) String() string {
	return [...]string{"", "read", "create", "run", "cancel", "answer", "delete", "stream"}[a]
}

// allowRoute checks the thread a route names in its path ({tid}, {chat},
// {rid}, a Durable Streams path) against a signed client token's rights.
func (s *Server) allowRoute(ctx context.Context, r *http.Request, p Principal, rt route) error {
	if !p.scoped() {
		return nil
	}
	switch rt.act {
	case actNone:
		return nil
	case actCreate:
		return allowFlag(p, actCreate)
	case actStream:
		return s.allowStream(ctx, p, r)
	}
	if chat := r.PathValue("chat"); chat != "" {
		// The AI SDK's routes answer a chat that does not exist yet (204,
		// []), as useChat expects of a new chat: one the user may
		// not see is let through to be answered the same, by the
		// handlers, which check the thread they find (aisdk.go).
		if err := s.allow(ctx, p, rt.act, chat); err != nil && tether.CodeOf(err) != tether.CodeNotFound {
			return err
		}
	}
	if tid := r.PathValue("tid"); tid != "" {
		err := s.allow(ctx, p, rt.act, tid)
		// A stop of AG-UI's current run (…/runs/current/cancel) on a
		// thread that does not exist yet, or that the user may not see,
		// has no run to end: let through to be answered 204 by stopRun,
		// which checks the thread it finds, so that the two look alike.
		if stopsCurrent := rt.act == actCancel && r.PathValue("rid") == "current"; err != nil && !(stopsCurrent && tether.CodeOf(err) == tether.CodeNotFound) {
			return err
		}
	}
	// AG-UI's run routes take "current" for the thread's active run: a
	// run of {tid}, checked above.
	if rid := r.PathValue("rid"); rid != "" && !(rid == "current" && r.PathValue("tid") != "") {
		return s.allowRun(ctx, p, rt.act, rid)
	}
	return nil
}

// allow is the rule of a signed client token on a thread: it may see the
// threads it owns and those its patterns match (others are not_found, so
// that it learns nothing of them), and do to them what its rights say
// (forbidden otherwise). A thread that does not exist is not_found here
// too, not let through to the route: created by another user just after
// this check, it would be served to this one.
func (s *Server) allow(ctx context.Context, p Principal, a act, threadID string) error {
	if !p.scoped() {
		return nil
	}
	owner, err := s.e.ThreadOwner(ctx, threadID)
	if errors.Is(err, tether.ErrNotFound) {
		return errThreadNotFound(threadID)
	}
	if err != nil {
		return err
	}
	if !p.sees(owner, threadID) {
		return errThreadNotFound(threadID)
	}
	return allowFlag(p, a)
}

// allowRun is allow for the thread of a run.
func (s *Server) allowRun(ctx context.Context, p Principal, a act, runID string) error {
	if !p.scoped() {
		return nil
	}
	tid, owner, err := s.e.RunThread(ctx, runID)
	if errors.Is(err, tether.ErrNotFound) {
		return errRunNotFound(runID)
	}
	if err != nil {
		return err
	}
	if !p.sees(owner, tid) {
		return errRunNotFound(runID)
	}
	return allowFlag(p, a)
}

// allowCreate checks a route that creates the thread it names if missing
// (AG-UI's threadId, the AI SDK's chat id): the create right when it does
// not exist, allow's rule when it does.
func (s *Server) allowCreate(ctx context.Context, p Principal, a act, threadID string) error {
	if !p.scoped() {
		return nil
	}
	owner, err := s.e.ThreadOwner(ctx, threadID)
	switch {
	case errors.Is(err, tether.ErrNotFound):
		if err := allowFlag(p, actCreate); err != nil {
			return err
		}
		return allowFlag(p, a)
	case err != nil:
		return err
	case !p.sees(owner, threadID):
		return errThreadNotFound(threadID)
	}
	return allowFlag(p, a)
}

// allowFlag checks the right an act needs (a user's token's; others have
// every right their role gives).
func allowFlag(p Principal, a act) error {
	if !p.scoped() {
		return nil
	}
	ok := true
	switch a {
	case actCreate:
		ok = p.Create
	case actRun:
		ok = p.Run
	case actCancel:
		ok = p.Cancel
	case actAnswer:
		ok = p.Answer
	}
	if !ok {
		return tether.Errorf(tether.CodeForbidden, "the token may not %s here (tether.%s is false)", a, a)
	}
	return nil
}

// allowStream maps a Durable Streams path to the thread rule: a thread's
// log (threads/{tid}) is read as the thread is; any other stream only if
// one of the token's patterns matches its path (streams have no owner);
// the subscription APIs (__ds/) are not a user's. A fork (PUT with
// Stream-Forked-From) reads its source, so the source must be one the
// token may read, as when it reads it (not_found otherwise): else a token
// could read any stream by forking it under a path of its own.
func (s *Server) allowStream(ctx context.Context, p Principal, r *http.Request) error {
	if err := s.allowStreamPath(ctx, p, strings.TrimPrefix(r.URL.Path, durablestreams.Prefix), r.Method); err != nil {
		return err
	}
	if src := r.Header.Get("Stream-Forked-From"); src != "" && r.Method == http.MethodPut {
		return s.allowStreamPath(ctx, p, streams.SourcePath(src), http.MethodGet)
	}
	return nil
}

// allowStreamPath is allowStream's rule for one path and method.
func (s *Server) allowStreamPath(ctx context.Context, p Principal, path, method string) error {
	if path == streams.ReservedPrefix || strings.HasPrefix(path, streams.ReservedPrefix+"/") {
		return tether.Errorf(tether.CodeForbidden, "a user's token may not use the subscription APIs")
	}
	if tid, ok := strings.CutPrefix(path, streams.ThreadsPrefix); ok {
		owner, err := s.e.ThreadOwner(ctx, tid)
		if err != nil && !errors.Is(err, tether.ErrNotFound) {
			return err
		}
		if err != nil || !p.sees(owner, tid) {
			return tether.Errorf(tether.CodeNotFound, "stream not found")
		}
		return nil
	}
	if matchAny(p.Threads, path) {
		return nil
	}
	if method == http.MethodGet || method == http.MethodHead {
		return tether.Errorf(tether.CodeNotFound, "stream not found")
	}
	return tether.Errorf(tether.CodeForbidden, "the token's tether.threads match no stream at this path")
}

// errThreadNotFound is what the engine answers for a thread that does not
// exist, word for word.
func errThreadNotFound(id string) error {
	return tether.Errorf(tether.CodeNotFound, "thread %s not found", clip.ID(id))
}

func errRunNotFound(id string) error {
	return tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(id))
}
