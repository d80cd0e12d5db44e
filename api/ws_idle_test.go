package api_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestWSIdleGoroutines: an idle socket with one subscription costs the
// server three goroutines: the reader, the writer (which also pings, on the
// server's beat) and the subscription's.
func TestWSIdleGoroutines(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	const sockets = 8
	for i := range sockets {
		w := v.ws("")
		w.subscribe("s", "thread_id", "t1", "after", "now")
		if m := w.expect("subscribed", "s"); m.Offset == "" {
			t.Fatalf("socket %d: subscribed without an offset: %s", i, m.raw)
		}
	}
	// Goroutines of the server's sockets: any whose stack is in the
	// WebSocket handler or a socket's methods.
	count := func() int {
		buf := make([]byte, 1<<22)
		n := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "api.(*wsConn)") || strings.Contains(g, "api.(*Server).websocket") {
				n++
			}
		}
		return n
	}
	testutil.Eventually(t, 5*time.Second, "3 goroutines per socket", func() bool { return count() == 3*sockets })
}

// TestWSDeadPeer: a client that reads but never answers the server's
// control pings (a peer gone without a FIN, or a proxy holding a dead
// socket) is cut a write timeout after the ping.
func TestWSDeadPeer(t *testing.T) {
	v := newEnv(t, api.Options{Heartbeat: 50 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(v.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The handshake by hand: this client has no WebSocket library to
	// answer pings for it.
	req := "GET /v1/ws HTTP/1.1\r\nHost: " + strings.TrimPrefix(v.url, "http://") + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", res.Status)
	}
	// Read frames (the server's are unmasked, with short lengths here)
	// until the server closes the connection.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	pings := 0
	for {
		var head [2]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the socket is still open after 10 s with %d control pings unanswered", pings)
			}
			break // closed by the server
		}
		if head[0]&0x0f == 0x9 {
			pings++
		}
		if _, err := io.CopyN(io.Discard, r, int64(head[1]&0x7f)); err != nil {
			break
		}
	}
	if pings == 0 {
		t.Fatal("the server closed the socket without a control ping")
	}
}
