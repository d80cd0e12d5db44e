package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// localAddrKey carries, in a dial's context, the local address to dial
// from (a net.IP; none: the system's choice).
type localAddrKey struct{}

// dialSocketFrom opens a WebSocket from local (nil: any), subscribes it to
// the thread from now on and returns once the server confirmed. A
// goroutine of the bench then reads the socket, so that the server's pings
// are answered (a socket that does not answer is cut, as a dead peer); it
// ends when the socket closes.
func (b *bencher) dialSocketFrom(ctx context.Context, hc *http.Client, threadID string, local net.IP) (io.Closer, error) {
	u, err := url.Parse(b.c.server)
	if err != nil {
		return nil, err
	}
	ws := *u
	ws.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	ws.Path = strings.TrimSuffix(u.Path, "/") + "/v1/ws"
	opts := &websocket.DialOptions{HTTPClient: hc, HTTPHeader: http.Header{}}
	if b.c.token != "" {
		opts.HTTPHeader.Set("Authorization", "Bearer "+b.c.token)
	}
	dctx, cancel := context.WithTimeout(context.WithValue(ctx, localAddrKey{}, local), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, ws.String(), opts)
	if err != nil {
		return nil, b.api.transportErr(err)
	}
	sub, _ := json.Marshal(map[string]string{"op": "subscribe", "id": "s", "thread_id": threadID, "after": "now"})
	if err := c.Write(dctx, websocket.MessageText, sub); err != nil {
		c.CloseNow()
		return nil, b.api.transportErr(err)
	}
	for {
		_, data, err := c.Read(dctx)
		if err != nil {
			c.CloseNow()
			return nil, b.api.transportErr(err)
		}
		var m struct {
			Op    string          `json:"op"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch m.Op {
		case "subscribed":
			go func() {
				for {
					if _, _, err := c.Read(context.Background()); err != nil {
						return
					}
				}
			}()
			return closeNow{c}, nil
		case "error":
			c.CloseNow()
			return nil, fmt.Errorf("subscribe: %s", m.Error)
		}
	}
}

// socketClient returns the HTTP client to dial WebSockets with: one
// transport, which dials from the local address in the dial's context.
func socketClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			local, _ := ctx.Value(localAddrKey{}).(net.IP)
			return localDialer(local).DialContext(ctx, network, addr)
		},
	}}
}

// closeNow closes a WebSocket as io.Closer: at once, with no handshake.
type closeNow struct{ c *websocket.Conn }

func (c closeNow) Close() error { return c.c.CloseNow() }
