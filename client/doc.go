// Package client is the Go client of a Tether server: the REST calls on
// threads and runs, and subscriptions to their event logs that resume by
// themselves after any drop, losing nothing and repeating nothing.
//
// Start with [New], then create a thread and a run, and follow the run
// with [Client.Subscribe]:
//
//	c := client.New("http://127.0.0.1:8080", &client.Options{Token: token})
//	th, err := c.CreateThread(ctx, "", nil)
//	if err != nil {
//		return err
//	}
//	run, err := c.CreateRun(ctx, th.ID, client.RunRequest{
//		Agent: "demo",
//		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "Hello"}}},
//	})
//	if err != nil {
//		return err
//	}
//	for u, err := range c.Subscribe(ctx, client.SubscribeRequest{RunID: run.ID, After: tether.OffsetStart}) {
//		if err != nil {
//			return err
//		}
//		if u.Event != nil && u.Event.Type == tether.EventTextDelta {
//			fmt.Print(u.Event.Delta)
//		}
//	}
//
// The loop ends after the run's run.finished. To follow a whole thread
// instead, give ThreadID and leave After empty: the first update is then a
// snapshot of the thread, and events follow until ctx is done.
//
// Errors from the server are *tether.Error values with the server's code,
// so errors.Is(err, tether.ErrNotFound) and tether.CodeOf work on them.
//
// # Caveats
//
//   - A subscription resumes by itself only while it is iterated. To pick
//     up later (after a restart of your program), keep the offset of the
//     last event you handled and pass it as After to a new Subscribe.
//   - With After set to tether.OffsetNow, the tail the server reports when
//     the stream opens becomes the cursor, so a later drop loses nothing;
//     but while the very first connection is not yet open, "now" is the
//     moment of each try.
//   - A server that asks to reconnect (event: reconnect) is obeyed at once,
//     but not twice in a row without an event in between: then the
//     backoff applies.
//   - An update with Snapshot.Reset set means the cursor was not found in
//     the log (unknown, from another log, or past retention): replace your
//     state with it; the events that follow continue from its offset.
//   - Deduplication is by offset: the client never yields an event at or
//     before the last one it yielded, even from a faulty server. The one
//     exception is a snapshot with Reset set, which starts over from its
//     own offset.
//   - The stall detector drops a connection with no byte for three
//     heartbeats of the server (15 s each unless its connected frame says
//     otherwise); it does not run while the consumer holds an update, so a
//     slow consumer is not taken for a dead server, but the server may end
//     a stream whose consumer is too slow, and the client resumes it.
//   - CreateThread without an id and SubmitInput are retried only when
//     the server cannot have acted (a refused connection, 503, 429): a
//     retry after the request reached the server could act twice. The other
//     calls are idempotent (CreateRun through its Idempotency-Key) and are
//     also retried after transport errors and other 5xx answers.
//   - The default HTTP client has no timeout, since streams are long: bound
//     REST calls with the context.
package client
