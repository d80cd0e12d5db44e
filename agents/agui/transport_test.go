package agui_test

import (
	"net/http"
	"testing"

	"github.com/tetherhq/tether/agents/agui"
)

// TestDefaultTransport checks that the default client bounds what happens
// before the upstream answers as Go's default transport does (a dial and
// a TLS handshake that hang), besides its own wait for the headers: a
// transport built from nothing dials with no timeout but the system's.
func TestDefaultTransport(t *testing.T) {
	a, err := agui.New(agui.Options{URL: "http://127.0.0.1:1/agent"})
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := agui.TransportOf(a).(*http.Transport)
	if !ok {
		t.Fatalf("transport %T", agui.TransportOf(a))
	}
	def := http.DefaultTransport.(*http.Transport)
	if tr.DialContext == nil || tr.TLSHandshakeTimeout != def.TLSHandshakeTimeout || tr.Proxy == nil || tr.ResponseHeaderTimeout == 0 {
		t.Fatalf("dial %v, TLS handshake timeout %v (want %v), proxy %v, header timeout %v",
			tr.DialContext != nil, tr.TLSHandshakeTimeout, def.TLSHandshakeTimeout, tr.Proxy != nil, tr.ResponseHeaderTimeout)
	}
}
