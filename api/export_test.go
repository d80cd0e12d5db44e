package api

import tether "github.com/tetherhq/tether"

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

// VerifyToken checks a bearer token as a server with these token options
// does.
func VerifyToken(o TokenOptions, tok string) (Principal, error) {
	verify, err := TokenVerifier(o)
	if err != nil {
		return Principal{}, err
	}
	return verify(tok)
}

// TokenVerifier returns the check of bearer tokens of a server with these
// token options (for benchmarks: one verifier, many tokens).
func TokenVerifier(o TokenOptions) (func(tok string) (Principal, error), error) {
	a := newAuth(nil, o)
	if a.jwtErr != nil {
		return nil, a.jwtErr
	}
	return func(tok string) (Principal, error) {
		if !isJWT(tok) {
			return Principal{}, tether.Errorf(tether.CodeUnauthorized, "invalid token")
		}
		return a.jwt.verify(tok)
	}, nil
}
