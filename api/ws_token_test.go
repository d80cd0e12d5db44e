package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestWSAccessTokenGivenTwice: ?access_token= given more than once is 400
// bad_request before the upgrade, as every repeated subscription
// parameter is (protocol.md §5): which token the server would take is not
// for the client to guess. The first was taken and the others dropped, so
// a URL with a stale token and a fresh one worked or not by their order.
// The tokens are neither echoed nor logged.
func TestWSAccessTokenGivenTwice(t *testing.T) {
	const clientTok = "client-token-0123456789"
	var logs testutil.SyncBuffer
	v := newEnv(t, api.Options{
		Keys:   []api.Key{{Token: clientTok, Role: api.RoleClient}},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	for _, tc := range []struct {
		query string
		hdr   http.Header
	}{
		{"?access_token=" + clientTok + "&access_token=" + clientTok, nil},
		{"?access_token=" + clientTok + "&access_token=stale-token-0123456789", nil},
		{"?access_token=stale-token-0123456789&access_token=" + clientTok, nil},
		{"?access_token=" + clientTok + "&access_token=", http.Header{"Authorization": {"Bearer " + clientTok}}},
	} {
		c, res, err := v.dialWS(tc.query, &websocket.DialOptions{HTTPHeader: tc.hdr})
		if err == nil {
			c.Close(websocket.StatusNormalClosure, "")
			t.Fatalf("dial %q: connected, want 400", tc.query)
		}
		if res == nil || res.StatusCode != 400 {
			t.Fatalf("dial %q: %v %v, want 400", tc.query, res, err)
		}
		b, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(b), `"code":"bad_request"`) || strings.Contains(string(b), "token-0123456789") {
			t.Fatalf("dial %q: body %s", tc.query, b)
		}
	}
	if strings.Contains(logs.String(), "token-0123456789") {
		t.Fatalf("a token was logged:\n%s", logs.String())
	}
	// Once is as before.
	w := v.ws("?access_token=" + clientTok)
	w.c.Close(websocket.StatusNormalClosure, "")
}
