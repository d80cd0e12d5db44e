// Package durablestreams serves the Durable Streams protocol over HTTP at
// /v1/stream/{path}: PUT creates (or forks) a stream, POST appends or
// closes, GET reads (catch-up with ETag and 304, long-poll with
// Stream-Cursor, SSE with a control event after every data event and
// base64 for binary streams), HEAD describes, DELETE deletes. Thread logs
// are readable, read-only, as JSON streams at /v1/stream/threads/{tid}.
// The subscription APIs are under /v1/stream/__ds/. The streams themselves
// are package streams; docs/protocol.md §8 is the contract.
//
// Use New with a streams.Service and mount the Handler at Prefix (package
// api does).
//
// # Caveats
//
// Errors have Tether's JSON error body; the protocol's own error codes
// appear only on the subscription APIs, which define them.
//
// Long polls and SSE responses end when Options.Stopping is done, so that
// a shutdown never waits on one; SSE responses also end after
// Options.SSELifetime, and clients reconnect from their offset. An SSE
// response that always has data ready asks Options.EndDue after every
// write, so that it ends there too.
package durablestreams
