package cluster

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// startLagProxy forwards TCP connections to target and delays what target
// sends back by lag: a node connected to NATS through it sees every other
// node's commits late (a slow node, or a slow network to it). It returns
// the proxy's address; the proxy and its connections close when the test
// ends.
func startLagProxy(t testing.TB, target string, lag time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Add(3)
			go func() { // client → server, as it comes
				defer wg.Done()
				io.Copy(server, client)
				server.Close()
			}()
			type chunk struct {
				at   time.Time
				data []byte
			}
			ch := make(chan chunk, 1<<16)
			go func() { // server → queue
				defer wg.Done()
				defer close(ch)
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 {
						ch <- chunk{time.Now().Add(lag), append([]byte(nil), buf[:n]...)}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() { // queue → client, each chunk lag after it came
				defer wg.Done()
				defer client.Close()
				for c := range ch {
					time.Sleep(time.Until(c.at))
					if _, err := client.Write(c.data); err != nil {
						server.Close()
						for range ch {
						}
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
