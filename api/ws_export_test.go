package api

// SetWSQueueBytes sets the outbound queue bound of sockets opened from now
// on and returns a function that restores it.
func SetWSQueueBytes(n int) (restore func()) {
	old := wsQueueBytes.Swap(int64(n))
	return func() { wsQueueBytes.Store(old) }
}
