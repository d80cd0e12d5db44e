package agui

import "net/http"

// TransportOf returns the transport of the agent's HTTP client.
func TransportOf(a *Agent) http.RoundTripper { return a.client.Transport }
