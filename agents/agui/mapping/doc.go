// Package mapping turns the events of an AG-UI agent (the Agent–User
// Interaction protocol) into Tether events: the pure half of the agui
// agent kind (package agents/agui), without I/O.
//
// Use New for each Tether run, then Event for every upstream event in the
// order it came. The Mapper keeps what the mapping needs (which upstream
// message is which Tether message, which tool calls are open, the thread's
// state as the upstream changed it) and returns, for each event, the
// Tether events to append. After an upstream run ended with an interrupt
// (Ended, Waiting), Resume prepares it for the stream that answers it.
//
// The table of the mapping, and the decisions behind it, are in
// docs/ag-ui.md ("In: an AG-UI agent behind Tether").
//
// # Caveats
//
// A Mapper is not safe for concurrent use.
//
// What has no Tether equivalent is kept as a custom event named "ag-ui."
// plus the AG-UI type, with the event as received; but the envelope events
// (RUN_STARTED, TEXT_MESSAGE_END, REASONING_START, REASONING_END,
// TOOL_CALL_END, THINKING_START, THINKING_END) are not stored: the Tether
// events say what they said, and the out projection makes them again. So
// are the timestamp and rawEvent of events that become Tether events.
//
// An event kept whole that is over MaxKept loses its rawEvent, and a RAW
// event still over it is dropped: a LangGraph RAW event holds the graph's
// whole state, and an event too large to store would end the run.
//
// A stream ends with its first RUN_FINISHED or RUN_ERROR: AG-UI allows
// several runs in one stream, which this mapping refuses.
package mapping
