package cluster

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections to a target until it is cut: then it
// closes every connection it forwards and refuses new ones (accepts and
// closes them) until it is joined again. A node connected to a single
// NATS server through it is cut off from NATS, as by a network partition.
type cutProxy struct {
	addr string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// startCutProxy starts a proxy to target; it closes when the test ends.
func startCutProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if cut {
				client.Close()
				continue
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(server, client)
				server.Close()
			}()
			go func() {
				defer wg.Done()
				io.Copy(client, server)
				client.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
		wg.Wait()
	})
	return p
}

// setCut cuts the proxy (closing its connections) or joins it again.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}
