// Package api serves Tether's HTTP interface over an engine: REST for
// threads, runs, final answers and workers; subscriptions as Server-Sent
// Events, JSON long-polls, or many at once over one WebSocket (/v1/ws);
// health and metrics. docs/protocol.md is the
// contract it implements.
//
// Use New with an engine and Options, then serve Server.Handler with an
// http.Server. On shutdown, call Server.Shutdown before http.Server.Shutdown:
// it tells every open stream to reconnect and ends it, so that the HTTP
// server's shutdown never waits on a stream.
//
// Who may call what is one table, routes in server.go, enforced for every
// route by guard (auth.go): roles by key or signed token (tokens.go,
// jwks.go), a worker's reads held to its own runs, a user's token held to
// its own threads by one rule (allow.go; threads named in a body or a
// WebSocket frame are checked by the same rule), streams ended at the
// token's exp (expiry.go), and, with or without keys, the refusal of
// other sites' pages
// (origin.go: cross-origin writes, undeclared JSON from browsers, and, on
// loopback without keys, foreign Host names).
//
// # Caveats
//
// Streams are never compressed (proxies and browsers must see each frame
// as it is written) and each flush has a write deadline, so a client that
// stops reading is cut instead of holding the server.
package api
