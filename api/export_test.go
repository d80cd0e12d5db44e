package api

// RouteRule is a route of the table and who may call it, for the route ×
// role test.
type RouteRule struct {
	Pattern string
	// Access is one of open, wake, client, worker, run, admin.
	Access string
	// Act is what the route does to the thread it names, for a user's
	// token: "", read, create, run, cancel, answer, delete, stream.
	Act string
}

// RouteTable returns the server's route table.
func RouteTable(s *Server) []RouteRule {
	names := map[access]string{accessOpen: "open", accessWake: "wake", accessClient: "client", accessWorker: "worker", accessRun: "run", accessAdmin: "admin"}
	var out []RouteRule
	for _, rt := range s.routes() {
		out = append(out, RouteRule{rt.pattern, names[rt.access], rt.act.String()})
	}
	return out
}
