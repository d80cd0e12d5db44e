package main

import (
	"net"
	"testing"
)

func TestPublicURL(t *testing.T) {
	for _, c := range []struct {
		flag, addr, want string
		bad              bool
	}{
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080", false},
		{"", "[::1]:9000", "http://[::1]:9000", false},
		{"", "0.0.0.0:8080", "", false},
		{"", "[::]:8080", "", false},
		{"https://tether.example.com/", "0.0.0.0:8080", "https://tether.example.com", false},
		{"https://example.com/tether", "127.0.0.1:1", "https://example.com/tether", false},
		{"tether.example.com", "127.0.0.1:1", "", true},
		{"ftp://x", "127.0.0.1:1", "", true},
		{"https://u:p@x.example", "127.0.0.1:1", "", true},
		{"https://x.example/?a=b", "127.0.0.1:1", "", true},
	} {
		addr, _ := net.ResolveTCPAddr("tcp", c.addr)
		got, err := publicURL(c.flag, addr)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("publicURL(%q, %s) = %q, %v", c.flag, c.addr, got, err)
		}
	}
}
