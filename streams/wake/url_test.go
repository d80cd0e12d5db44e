package wake

import (
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// TestDeliveryChecksTheAddressDialed: what a webhook's host resolves to is
// checked when it is dialed, not only its name when the subscription is
// made, so a name that resolves (or rebinds) to loopback or a private
// address is never connected to: here "localhost", by name.
func TestDeliveryChecksTheAddressDialed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c := webhookClient(2*time.Second, false)
	for _, u := range []string{"http://localhost:%d/hook", "http://127.0.0.1:%d/hook", "http://[::ffff:127.0.0.1]:%d/hook"} {
		u = fmt.Sprintf(u, port)
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: delivered", u)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connections", n)
	}
	// Allowed by the operator, the same request is made.
	if resp, err := webhookClient(2*time.Second, true).Get(fmt.Sprintf("http://localhost:%d/hook", port)); err == nil {
		resp.Body.Close()
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("with loopback allowed, %d connections", n)
	}
}

func TestAllowedAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true, "::ffff:8.8.8.8": true,
		"127.0.0.1": false, "127.9.9.9": false, "::1": false, "::ffff:127.0.0.1": false,
		"10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.100.100.200": false, "100.64.0.1": false, "0.0.0.0": false, "0.1.2.3": false, "::": false,
		"224.0.0.1": false, "255.255.255.255": false, "240.0.0.1": false, "198.18.0.1": false,
		"fd00:ec2::254": false, "fe80::1": false, "ff02::1": false, "64:ff9b::a00:1": false,
		"2002:a00:1::": false, "2001:0:4136:e378::1": false, "::ffff:10.0.0.1": false,
	} {
		if got := allowedAddr(netip.MustParseAddr(addr), false); got != want {
			t.Errorf("allowedAddr(%s) = %v", addr, got)
		}
	}
	if !allowedAddr(netip.MustParseAddr("127.0.0.1"), true) || !allowedAddr(netip.MustParseAddr("::1"), true) ||
		allowedAddr(netip.MustParseAddr("10.0.0.1"), true) {
		t.Fatal("loopback allowed: only loopback is added")
	}
}
