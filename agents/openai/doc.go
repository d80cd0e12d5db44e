// Package openai is Tether's built-in agent for OpenAI-compatible chat
// completions APIs (OpenAI, Azure-style gateways, OpenRouter, vLLM, Ollama,
// llama.cpp, DeepSeek…): it sends a run's conversation to
// POST {BaseURL}/chat/completions with streaming on, and streams the answer
// into the run's log as it comes.
//
// Use [New] with [Options], and give the agent to the runner under [Name]:
//
//	a, err := openai.New(openai.Options{BaseURL: openai.DefaultBaseURL, Model: "gpt-4o-mini", APIKey: key})
//	rn := runner.New(e, map[string]agents.Agent{demo.Name: demo.New(), openai.Name: a}, runner.Options{})
//
// # Serving
//
// tether serve maps its flags to Options like this (only cmd/ reads flags
// and the environment):
//
//	--openai-base-url URL  $TETHER_OPENAI_BASE_URL, default DefaultBaseURL  → Options.BaseURL
//	--openai-model M       $TETHER_OPENAI_MODEL, no default                → Options.Model
//	$OPENAI_API_KEY        no flag: a key in argv shows in ps and history   → Options.APIKey
//
// --agent openai makes it the default agent of runs that name none. The
// agent should be registered when --agent is openai or an --openai-* flag
// is set; an error from New is a startup error (it never quotes the key).
// The other Options keep their defaults.
//
// # What a run produces
//
// The request holds the model, the system prompt (if set), then the text
// parts of the thread's messages in order with their roles (user,
// assistant, system, tool); reasoning and tool parts are not sent, and
// messages without text are left out. It asks for
// stream_options.include_usage.
//
// The answer is one assistant message, started with its first output:
//
//   - choices[0].delta.content → text.delta;
//   - delta.reasoning_content, or delta.reasoning if it is a string →
//     reasoning.delta (so reasoning and text parts alternate as the model
//     switches);
//   - delta.tool_calls[i] → tool.started once its index is first seen with
//     a name (call_id is the provider's id, or a made-up one if it has none,
//     is not a valid Tether ID, or repeats), its argument pieces →
//     tool.delta (pieces that come before the name are held until it
//     comes, up to 64 KiB: more, or a name over 256 bytes, ends the run
//     upstream_error); when the provider sets finish_reason, every open
//     call gets tool.finished, with input = the arguments if they are
//     valid JSON of at most 64 KiB (else without input: the reducer
//     parses the streamed text itself, or keeps it as a string);
//   - at data: [DONE] (or the end of a stream that had a finish_reason),
//     message.updated with the metadata {"model", "finish_reason",
//     "usage"} the provider reported (a model name or finish reason over
//     256 bytes, a usage over 16 KiB, is left out), message.finished
//     done and run.finished done, in one append.
//
// Deltas are appended in batches: one append per Options.FlushInterval
// (50ms) or per 64 events, whichever comes first.
//
// # Per-run options
//
// A run's metadata may override the model and add sampling settings:
//
//	{"openai": {"model": "gpt-4o", "temperature": 0.2, "max_tokens": 512}}
//
// model is a string of 1 to 256 bytes, temperature a number from 0 to 2,
// max_tokens a whole number from 1 to 16777216. Any other field, or a value
// of the wrong type, ends the run error with code bad_options and a message
// that says what is wrong; so does a run without a model when Options.Model
// is empty. Nothing is sent to the provider then.
//
// # Failures
//
// A non-2xx answer, a connection error, or a stream that ends before any
// output is retried (Options.MaxRetries, 2), except for 4xx other than
// 408 and 429; pauses honour Retry-After (and retry-after-ms) up to 10s.
// Nothing is retried once any output arrived. Then the run ends error, its
// message (if any) error, with one of:
//
//   - upstream_rate_limited: HTTP 429 on the last try;
//   - upstream_error: another status, the provider unreachable, an error
//     reported inside the stream, a chunk that is not valid JSON, a line
//     or an event of the stream over 8 MiB, or a JSON answer instead of a
//     stream;
//   - upstream_disconnected: the stream ended with neither data: [DONE] nor
//     a finish_reason, or the provider sent nothing (not a byte) for
//     Options.IdleTimeout (10 minutes; not retried). What was streamed
//     stays in the message.
//
// Error messages name the HTTP status at most ("The model provider answered
// HTTP 500."), never the provider's body; the log gets the status and the
// provider's error type and code, never its message or the key. When the
// run's context ends (a cancel, a shutdown) the request is abandoned, what
// was received is appended, and Run returns the context's error.
//
// # Caveats
//
// The agent does not run tools: it streams the calls the model makes, and
// the run ends when the model's turn ends (finish_reason tool_calls too).
// Tool calls and their results are not sent back to the model on later
// runs, and a message with role tool is sent without a tool_call_id, which
// strict providers (OpenAI) reject with HTTP 400.
//
// Any client that may start runs may pick any model the key allows, through
// metadata.openai.model.
//
// max_tokens is the classic parameter. OpenAI's reasoning models want
// max_completion_tokens and reject max_tokens, and some reject a
// temperature other than 1; such runs end upstream_error (HTTP 400). Older
// servers that do not know stream_options may reject every request.
//
// The default client waits 30s for the response headers; a gateway that
// holds them back until the model's first token can hit that with slow
// models (pass an HTTPClient with a longer ResponseHeaderTimeout).
//
// There is no overall timeout (answers stream for minutes), only the idle
// one: a provider that keeps the connection open and sends nothing holds
// the run, and its place in the runner, for up to Options.IdleTimeout. Its
// default, 10 minutes, is the read timeout of OpenAI's own SDKs: reasoning
// models can think for minutes before their first token, and most
// providers send nothing meanwhile.
//
// Events are never sent twice: a batch whose append fails is dropped. An
// append that fails ends the run (agent_error), except when the run's
// context ended, which can cost the last batch (50ms of deltas) if the
// cancel comes during its append.
//
// Only the first choice is read (the request asks for one). A single delta
// larger than the engine's event limit (1 MiB) fails the run (agent_error).
package openai
