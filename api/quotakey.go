package api

import (
	"net"
	"net/http"
	"net/netip"
)

// quotaKey names the principal a request's limits are counted against
// (limits.go), or "" for one that is not limited.
//
// With auth on, a principal is what the request was let in with: the
// user of a signed token, "sub:<sub>" (with its iss; so a user's limits
// hold across the tokens it is given, and every user of one app has their
// own), or a static key, "key:<id>" (Key.id, the digest that also names
// it in leases, never the token). With auth off, it is the client's address, "ip:<addr>" (an IPv6
// client by its /64, which one host usually holds whole); a client on
// loopback is not limited, so that a server on loopback without keys
// never throttles its only user. (The routes that are limited all need a
// key when keys are configured.)
func quotaKey(r *http.Request) string {
	if p, ok := PrincipalFrom(r.Context()); ok && p.ID != anon.ID {
		return p.ID
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return ""
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return "ip:" + p.String()
	}
	return "ip:" + ip.String()
}
