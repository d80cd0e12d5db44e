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
// Errors from the server are *tether.Error values with the server's code
// and the answer's HTTP status (Status), so errors.Is(err,
// tether.ErrNotFound) and tether.CodeOf work on them. An error answer that
// is not the protocol's (a proxy's page instead of an error body) has the
// code its status means (404 not_found, 503 unavailable, …; internal for
// another 5xx, protocol for another 4xx such as 405), and a 2xx whose body
// is not the JSON expected (empty, HTML, JSON without the resource's id)
// the client's code protocol (CodeProtocol), as a stream that is not an event stream; the body is
// never in the message. A 2xx whose body is cut short (the connection
// dropped mid-answer) is a transport error, retried as one. A 429 or 503
// is retried no sooner than its Retry-After; when the retries are spent,
// the error keeps that wait (RetryAfter), so a caller can say how long to
// wait before trying again.
//
// # Tokens
//
// Options.Token is a fixed token: a static key, sent as it is. For a
// user's short-lived signed token (a JWT your backend signs; see
// docs/operations.md, "Security"), give Options.TokenFunc instead:
//
//	c := client.New("https://tether.example.com", &client.Options{
//		TokenFunc: func(ctx context.Context) (string, error) {
//			return mintToken(ctx, userID) // a JWT valid a few minutes
//		},
//	})
//
// The client keeps the JWT it returns until 30 s before its exp
// (Options.TokenRefreshAhead; at most half of its lifetime) and then asks
// for a new one, reading exp without verifying anything, by its own
// clock; a token that is not a JWT with an exp is asked for at each
// request. When the server says the token has expired anyway (a clock
// behind the server's), the function is asked at once: a request answered
// 401 token_expired is sent once more with the new token (whatever the
// request: the server refused it before acting), and a subscription the
// server ends at its token's exp (reconnect, reason token_expired)
// resumes from its last event with it, losing nothing and repeating
// nothing. A function that fails while the token held is still before
// its exp does not fail the request: that token is sent, and the function
// is asked again halfway to the exp. Otherwise it fails the request with
// the code [CodeTokenUnavailable], and sends nothing; a subscription or a worker
// retries it with its backoff. A Worker gets its claims, appends,
// heartbeats and follows of runs the same way: a worker's leases are
// bound to its token's sub, so a new token of the same worker goes on
// with the runs it holds.
//
// # Workers
//
// A [Worker] runs agents in your own process: the same [agents.Agent] that
// the server runs in-process. It claims runs over HTTP for the agents'
// names and gives each agent an agents.Session whose events go to the
// server:
//
//	w, err := c.NewWorker(client.WorkerOptions{Agents: map[string]agents.Agent{"echo": echo}})
//	if err != nil {
//		return err
//	}
//	return w.Run(ctx) // claims and runs until ctx ends
//
// For each run it claims, the worker does what the in-process runner does:
// it follows the run from its run.started event, hands run.input to
// Session.Wait, and cancels the agent's context on run.cancel_requested, on
// a run.finished by the server, and when the lease is lost; it renews the
// lease every third of its TTL while no append did; when the agent
// returns, it finishes the run unless the agent did: done if the agent
// returned nil, cancelled if a cancel was requested, else error with code
// agent_error and a generic message (the real error, or the panic, goes to
// the worker's log).
//
// Appends are idempotent: each carries Producer-Id (the worker ID),
// Producer-Epoch (the run's attempt - 1) and Producer-Seq (0, 1, 2… within
// the run). A transport error or a 408, 429 or 5xx answer is retried with
// backoff and jitter and the same sequence number, so an append that was
// committed but whose answer was lost (a crash, a cut connection) comes
// back as a duplicate (204), never as a second copy. Heartbeats are
// retried the same way.
//
// While the server is down, Emit blocks and retries for as long as the
// lease may still be valid. The server keeps a worker's lease across its
// own restart, so the first append after it is back renews the lease and
// the run goes on. The worker gives up two lease TTLs after the last
// answer that renewed the lease (one TTL is the lease; the second covers
// renewals whose answers were lost, which the server can only have made
// while the lease was valid): Emit then returns an error with code
// lease_lost, the agent's context ends, and the run is left to the
// server, which aborts it (worker_lost) or hands it to another worker.
//
// Answers that retrying cannot change end the agent's context when they
// mean the run is out of the worker's hands: 404 (the run or its thread is
// gone), 410 lease_lost, 401 and 403 (also a stale Producer-Epoch: a later
// attempt of the run took over), and a 409 that reports a gap in the
// producer's sequence. Other refusals (400, 413, a 409 for an event that is
// impossible now) are returned to the agent by Emit.
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
//   - Every REST call is retried after transport errors (an answer cut
//     short by a dropped connection too), 5xx and 429 answers, because
//     each is safe to repeat: a 503 may be a write that landed whose
//     outcome the server could not learn (docs/protocol.md §1), and a
//     dropped connection may hide one. CreateThread without an id names
//     the thread itself (a create-if-absent); CreateRun sends an
//     Idempotency-Key; the server knows a repeat of the same answer to a
//     run's request (SubmitInput) for the answer it took, and a run never
//     asks again under an answered request id; a cancel changes nothing
//     the second time; and a DeleteThread retried after such a failure
//     that finds no thread returns nil (the first try may have deleted
//     it). A server older than this client answers a repeated answer 409
//     conflict.
//   - The default HTTP client has no timeout, since streams are long: bound
//     REST calls with the context.
//   - A token that the token function returns and the server then finds
//     expired is sent once more with a new one, not more: a function that
//     keeps returning expired tokens (a backend that caches them past their
//     exp) gets the 401 token_expired error. A static Token is never
//     refreshed: a subscription the server ends for its exp ends with that
//     error once the server's leeway (30 s) is over.
//   - A worker's Emit whose context ends while its append is in flight may
//     still be appended: the worker sends that batch again, with its
//     sequence number, before the next one, so its events land at most
//     once and in order. An Emit whose context had already ended sends
//     nothing (its error wraps agents.ErrNotSent): a Finish made so
//     leaves the run open, and the worker ends it when the agent returns
//     (cancelled if a cancel was requested).
//   - When Worker.Run's context ends, the running agents are cancelled but
//     their runs are not finished: the server aborts them when their leases
//     expire, or hands them to another worker if the agents are Resumable.
//   - A claim whose answer is lost (the server crashed right after it, or
//     Run's context ended during the long poll) leaves a run that no worker
//     runs until its lease expires; then it ends the same way.
package client
