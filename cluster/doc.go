// Package cluster tests several Tether nodes on one NATS JetStream.
//
// It holds no code, only tests: the nodes are in-process (engine, runner
// with the demo agent, and API over httptest, each with its own
// natsstore.Store) or real tether processes, all on in-process nats-servers
// (a three-server JetStream cluster, the stream and bucket replicated three
// times). The tests check what docs/operations.md ("Several nodes")
// promises: a client resumes on any node and gets the same events; one
// active run per thread across nodes; a node killed mid-run has its runs
// ended once, by a survivor; a NATS server killed mid-run loses no
// acknowledged event.
package cluster
