package agui

import tether "github.com/tetherhq/tether"

// failure is why a run ends error: what clients read (info), and for the
// log what happened.
type failure struct {
	info  tether.ErrorInfo
	cause error
}

// Codes of the errors a run of this agent ends with besides the
// upstream's own (RUN_ERROR's code, else mapping.ErrorCode). Their
// messages are written for people and never quote the upstream's body.
const (
	// CodeUpstreamError: the upstream answered a non-2xx status, could not
	// be reached, did not stream AG-UI, or sent an event that breaks AG-UI.
	CodeUpstreamError = "upstream_error"
	// CodeUpstreamDisconnected: the stream ended before RUN_FINISHED or
	// RUN_ERROR, or the upstream sent nothing for Options.IdleTimeout.
	// What was streamed stays in the run.
	CodeUpstreamDisconnected = "upstream_disconnected"
	// CodeStoreError: Tether could not store the run's events (its store
	// failed, not because of what the upstream sent), though it tried
	// again while it could: a store unavailable for a moment holds the
	// run up instead. The run stops; what was stored stays in it.
	CodeStoreError = "store_error"
)

func fail(code, msg string, cause error) *failure {
	return &failure{info: tether.ErrorInfo{Code: code, Message: msg}, cause: cause}
}
