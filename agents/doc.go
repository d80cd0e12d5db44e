// Package agents defines who produces the events of a run: an [Agent] gets
// a [Session] for each run it is given and emits messages, reasoning, text
// and tool calls through it.
//
// The same Agent runs in-process (package agents/runner, which claims runs
// from the engine) or in a separate worker process (the Go client's worker,
// over HTTP): only the [Transport] under the Session differs. Built-in
// agents live in subpackages: demo (deterministic and scripted, the default),
// openai (any OpenAI-compatible streaming chat endpoint) and agui (any AG-UI
// agent, by URL: pydantic-ai, LangGraph and others).
//
// # Caveats
//
// A Session is not safe for concurrent use: an agent emits its events in
// order from one goroutine. Events are appended one call at a time; an agent
// that streams very small deltas very fast may batch them itself with Emit.
package agents
