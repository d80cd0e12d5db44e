// Package wake implements the subscription APIs of the Durable Streams
// protocol (the reserved __ds/ paths): a subscription follows streams, by
// name or by a glob pattern, and is woken when one of them has data past
// what it acknowledged, so that a worker need not poll.
//
// A webhook subscription is woken by a POST to its URL, signed with
// Ed25519 (Webhook-Signature: t=…,kid=…,ed25519=…; the public keys are
// served as a JWKS), carrying a callback URL and a token; the receiver
// acknowledges offsets through the callback (or answers {"done": true}).
// A pull-wake subscription is woken by an event appended to its wake
// stream; a worker claims the wake (one holder at a time, under a lease),
// acknowledges and releases it. Every wake has a generation: a token or an
// acknowledgement of an older one is refused (FENCED).
//
// Use New with the streams.Service, then Start, and give Notify to the
// service as its OnAppend, and Deleted as its OnDelete.
//
// # Caveats
//
// Subscriptions, their links and acknowledged offsets and their current
// generation are stored (store namespace "dssub"). The current wake, its
// lease and its holder are not: after a restart every subscription with
// pending data is woken again, with a new generation, and tokens of the
// old wakes are fenced.
//
// Webhook deliveries run on their own goroutines and retry with backoff
// (up to a minute apart), one request at a time per subscription: a
// webhook wake's lease starts when the receiver answers 2xx. Appends never
// wait for them. Webhook URLs must
// be https to a public host; loopback (http or https) only with
// Options.AllowLoopback; the dialer checks every address it connects to,
// so a public name that resolves to a private or loopback address is
// refused too (see url.go). Callback and JWKS URLs are built from
// Options.BaseURL, never from a request, and webhook subscriptions need
// one.
package wake
