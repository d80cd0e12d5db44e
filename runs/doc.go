// Package runs is the state model of a thread, pure: the state machine that
// rejects impossible events and the reducer that folds committed events into
// a snapshot. It does no I/O.
//
// The state of a thread is a fold of its event log. [Machine] holds what
// validation needs (runs, message statuses, tool call statuses, the open
// request of a waiting run); [State] adds the content (message parts and
// metadata) and exports a [tether.Snapshot].
//
// The engine keeps one State per loaded thread, folding each committed event
// with [State.Apply]. To validate a batch before committing it, it applies
// the batch to a [Tx] ([Machine.Begin]) on a speculative Machine (a
// [Machine.Clone] of the committed one, plus batches in flight): all events
// of the batch pass or the Tx is dropped. [WorkerEvent] checks first what a
// worker may send at all, and [WorkerRules] what it may send in the state
// the Tx sees (after a cancel request only cancelled ends the run; the
// run's input messages are not the worker's to change; a request id
// answered in the run is not asked again). These two bind
// workers only, never the fold: a log holding what they refuse still
// folds. Their vectors are in testdata/worker.
//
// # Rules
//
// Every event carries the run_id of an existing run (the server sets it).
// Fields an event type does not use must be absent (a JSON null counts as
// present), and fields it requires present, or the event is rejected with
// bad_request naming the field. The ids that events create (message_id,
// call_id, request.id, a new run's id), and run.input's request_id, must
// pass [tether.ValidID]. JSON fields must be valid JSON. A malformed event, or one that names a
// run, message or tool call that does not exist, is bad_request; a
// well-formed event that is impossible in the current state (run or message
// finished, duplicate id, wrong status) is conflict. Checks run in this
// order: the event's shape, then its run (unknown: bad_request; finished:
// conflict, "run X is finished"), then the rules of its type:
//
//   - run.created: run required, with a valid id equal to run_id, the
//     thread's id and status pending, and nothing only later events set
//     (attempt, started_at, completed_at, cancel_requested_at, error,
//     request, worker_id); the id must be new. The run is pending;
//     created_at and last_update_at default to ts.
//   - message.created: message required, with a new valid id, a valid role,
//     parts of known types (text, reasoning: text; tool: call_id unique in
//     the message, name, input, output, error, status done|error; data:
//     name, data), status empty (done) or terminal; thread_id and run_id
//     empty or those of the event. Stored with the event's run, started_at
//     = last_update_at = ts. A tool part without status is error if it
//     has a non-null error, else done.
//   - run.started: worker_id required. The run is pending (attempt becomes
//     attempt, default 1) or, for a reclaim after a lost worker, running or
//     waiting with an attempt above the current one; no other run may be
//     running or waiting. A pending run becomes running; a reclaimed one
//     keeps its status (a waiting run still waits on its request). The run
//     gets this worker_id; started_at is set on the first start only.
//   - message.started: message_id new in the thread, role required; the run
//     is running or waiting. The message is running, its metadata that of
//     the event or {}.
//   - text.delta, reasoning.delta: the message exists (bad_request),
//     belongs to the run (bad_request) and is running (conflict). The delta
//     extends the message's last part if it has the same type, else starts
//     a new part. An empty delta changes no content.
//   - tool.started: call_id and name required; the message is running and
//     has no call with this call_id. Adds a running tool part.
//   - tool.delta: the call exists in the message and is running; the delta
//     extends its input_text.
//   - tool.finished: the call exists and is running. input, output, error
//     are optional; the call ends error if error is set and not null, else
//     done (a null error is not kept). Its input is the event's input if
//     set, else input_text if it parses as JSON, else input_text as a JSON
//     string (null if empty); input_text is cleared. A call that ends with
//     its message instead keeps its input_text.
//   - message.updated: metadata required, a JSON object, merged into the
//     message's metadata as an RFC 7396 merge patch; allowed on a finished
//     message while its run is not finished.
//   - message.finished: status done|error|aborted required; the message is
//     running.
//   - run.waiting: request with a valid id and a kind required; the run is
//     running. The run (and the thread) is waiting on the request.
//   - run.input: request_id required; the run is waiting on that request
//     (conflict otherwise). The run is running again; value is any JSON.
//     The machine keeps each answered request's id and a digest of its
//     value ([Machine.Answered]), so that the engine knows a client's
//     repeat of an answer for the answer it already took.
//   - custom: name required. No effect on the state.
//   - state.snapshot: state required (any JSON value; null counts as
//     present); the run is running or waiting (conflict otherwise). The
//     thread's state becomes state.
//   - state.delta: patch required, an RFC 6902 JSON Patch: an array of
//     operations with a known op, JSON Pointer paths, from for move and
//     copy, value for add, replace and test (bad_request otherwise); the
//     run is running or waiting. The patch is applied to the thread's
//     state as a whole: if an operation fails (a missing path, a failed
//     test) it is conflict and the state does not change. See
//     jsonpatch.go for what the application tolerates beyond the RFC.
//   - state.snapshot and state.delta, in a Tx (a new write), not in a
//     State's fold: a state over 8 MiB or 255 levels deep is too_large
//     (maxStateBytes, maxStateDepth).
//   - run.cancel_requested: sets cancel_requested_at, the first time only.
//   - run.finished: status done|error|cancelled|aborted required; error, if
//     set and not null, is exactly {code, message} with non-empty strings.
//     Any non-terminal run may finish, a pending one too. Sets completed_at
//     and error, drops the open request, and ends every running message of
//     the run: done if the run is done, error if error, aborted otherwise.
//
// Every event sets its run's last_update_at to ts, and every event that
// touches a message sets the message's last_update_at. When a message ends,
// its running tool calls end done if the message is done, else error.
//
// The thread's state is the thread's, not a run's: it lives on across
// runs, null until first set (and again after a state.snapshot of null or
// a remove of the root), and every snapshot carries it (absent while
// null).
//
// The thread is busy while a run is running, waiting while the active run
// waits, busy while a run is pending, else error if the last run to finish
// ended error or aborted, else idle. Its active run is the running or
// waiting run, else the oldest pending one.
//
// # Caveats
//
// A Machine, a Tx and a State are not safe for concurrent use.
//
// Events must carry their ts before they are applied, also to a speculative
// Tx: the machine records it as the runs' and messages' last_update_at.
//
// A Tx sees its machine as it was at Begin. Committing one Tx, or applying
// to the State that owns the machine, makes every other open Tx of that
// machine unusable: their Apply and Commit panic rather than overwrite
// changes they did not see.
//
// The thread's state is held by the Machine (a state.delta is validated by
// applying it), as one JSON document that each change replaces: a delta
// costs O(size of the state), not O(size of the patch).
//
// A State keeps references to the JSON fields (json.RawMessage) of the
// events it folds, and its snapshots share them: committed events and
// snapshots are read-only.
//
// The Machine does not enforce that runs start in creation order, nor that
// the run finishing is the one a worker holds: the engine decides who runs
// next and who may append.
//
// A reclaimed run (run.started with a higher attempt) keeps the messages
// its earlier attempt left running; they end with the run.
package runs
