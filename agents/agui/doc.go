// Package agui is the agent kind that puts any AG-UI agent behind Tether:
// pydantic-ai's AGUIAdapter, LangGraph's ag-ui-langgraph, and any other
// server of the Agent–User Interaction protocol.
//
// An Agent is configured with the upstream's URL (tether serve
// --ag-ui-agent NAME=URL). Each run POSTs the thread's conversation,
// its state and what an AG-UI front end sent (metadata.ag_ui) as a
// RunAgentInput, and appends every event the upstream streams back, mapped
// to Tether events (package mapping), as it arrives: a client that drops
// resumes from the log, whatever the upstream does. An interrupt outcome
// makes the run wait (run.waiting); its answer is POSTed upstream as
// resume[] and the same run goes on.
//
// The mapping table and the decisions are in docs/ag-ui.md.
//
// # Caveats
//
// Deltas that arrive while an append is in flight are appended together,
// joined: the log holds the same text in fewer events.
//
// A run ends error when the upstream answers a non-2xx status, does not
// stream text/event-stream, sends an event that breaks AG-UI, or ends its
// stream before RUN_FINISHED or RUN_ERROR. The upstream's body is never
// quoted (protocol §1); a RUN_ERROR's own message is, since an AG-UI agent
// writes it for its front end.
//
// An upstream that sends nothing at all (not a byte) for
// Options.IdleTimeout (10 minutes) has its request closed, and the run
// ends error (upstream_disconnected).
//
// Cancelling a run closes the upstream request; an AG-UI agent has no
// other way to be told. A server restart aborts the run, as for every
// in-process agent: the upstream request is gone with the process.
package agui
