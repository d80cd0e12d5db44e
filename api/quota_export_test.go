package api

// BodyBytesInUse returns the request-body bytes the server's budget has
// handed out (0 without a budget).
func BodyBytesInUse(s *Server) int64 {
	if s.budget == nil {
		return 0
	}
	return s.budget.inUse()
}

// BodyRequestsWaiting returns the requests waiting for room in the
// server's budget.
func BodyRequestsWaiting(s *Server) int {
	if s.budget == nil {
		return 0
	}
	return s.budget.waitersLen()
}
