package wake

import "fmt"

// Error codes of the subscription APIs (the protocol's, on the wire as
// they are).
const (
	CodeInvalidRequest       = "INVALID_REQUEST"
	CodeSubscriptionNotFound = "SUBSCRIPTION_NOT_FOUND"
	CodeSubscriptionExists   = "SUBSCRIPTION_ALREADY_EXISTS"
	CodeWebhookURLRejected   = "WEBHOOK_URL_REJECTED"
	CodeTokenInvalid         = "TOKEN_INVALID"
	CodeTokenExpired         = "TOKEN_EXPIRED"
	CodeFenced               = "FENCED"
	CodeAlreadyClaimed       = "ALREADY_CLAIMED"
	CodeNoPendingWork        = "NO_PENDING_WORK"
	CodeInvalidOffset        = "INVALID_OFFSET"
	CodeUnavailable          = "UNAVAILABLE"
)

// Error is a refused subscription request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// CurrentHolder and Generation describe the claim that refused
	// another (ALREADY_CLAIMED).
	CurrentHolder string `json:"current_holder,omitempty"`
	Generation    int64  `json:"generation,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
