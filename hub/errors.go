package hub

import "errors"

// Errors returned by [Subscriber.Next] and [Subscriber.TryNext].
var (
	// ErrSlow means the subscriber fell further behind than its buffer
	// allows (Options.BufferBytes or Options.BufferEvents) and was cut. It
	// comes after every record that was queued before the cut; the caller
	// resumes with a new subscription from [Subscriber.Offset].
	ErrSlow = errors.New("hub: subscriber too slow")
	// ErrClosed means the subscriber was closed, its thread was closed
	// (deleted) or the hub was closed.
	ErrClosed = errors.New("hub: closed")
)
