// Package aisdk projects a thread's log onto the AI SDK's UI message
// stream (ai 7, @ai-sdk/react 4): what useChat reads. It is pure: events
// (and a run snapshot, for a stream rebuilt from its start) in, chunks
// out; the HTTP layer (api/aisdk.go) subscribes to the engine and creates
// runs like every other route, so there is no second write path and no
// second copy of the data.
//
// Start with [Stream]: NewStream(run), then Event for each of the run's
// events, in log order. [Prelude] rebuilds a run's UI message from its
// snapshot and returns the Stream to continue with; [Messages] is a
// thread as useChat's messages, built from the same Prelude, so that the
// POST stream, every rebuild and the message list name the answer with
// the same id (the run's first assistant message's). [PlanChat] decides
// what a chat request does: a new run, or the answer to a waiting run's
// request.
//
// One run is one UI message: each assistant message of the run is a step
// (start-step … finish-step); text and reasoning parts keep their order;
// tool calls are static tool parts; a waiting run's request is a dynamic
// tool part the app answers with addToolOutput, except an approval of a
// running call of the run, which is the call part's approval (the AI
// SDK's approval flow: addToolApprovalResponse; approval.go); custom
// events are transient data chunks. docs/ai-sdk.md has the whole mapping.
//
// # Caveats
//
//   - A run that waits before its first assistant message shows the
//     request in a message named by the run's id; once answered, the
//     message is named by its first assistant message when rebuilt.
//   - Assistant messages of one run that stream at the same time
//     interleave their parts on the stream, not in a snapshot.
//   - A text part that spans a waiting point is two parts on the live
//     stream (the second re-opened with the same id) and one when
//     rebuilt; a request, once answered, stays on the stream as an
//     answered dynamic tool part but is not in a snapshot.
//   - An approved call keeps its approval on the stream, not in a
//     snapshot (which keeps no answered request); a denied call is
//     denied in both (its error's code is "denied").
package aisdk
