package wake

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Where webhooks may go. A subscription makes the server send requests to
// a URL of the subscriber's choosing, so that URL must not lead into the
// network the server sits in: its own machine (loopback: local services,
// databases, other daemons' admin ports), private and link-local networks,
// cloud metadata services, or special-purpose ranges that reach them
// (NAT64, 6to4, Teredo). A URL is checked twice: by name or address when
// the subscription is made, and by the address actually dialed at every
// delivery, so that a public name that resolves, or later rebinds, to one
// of those addresses is refused too. Loopback is allowed only when the
// operator says so (Options.AllowLoopback: development, tests).

// checkWebhookURL checks a webhook URL when a subscription is made: https
// to a host that is not a loopback, private or special address or name;
// with loopback allowed, also http or https to localhost, 127.x.x.x or
// ::1. IPv6 literals other than ::1 are refused (names may resolve to
// IPv6 addresses, which are checked when dialed).
func checkWebhookURL(raw string, loopback bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		return errors.New("webhook.url must be an absolute URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("webhook.url must use https")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	ip, err := netip.ParseAddr(host)
	isIP := err == nil
	if isIP {
		ip = ip.Unmap()
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || isIP && ip.IsLoopback() {
		if !loopback {
			return errors.New("webhook URLs to this server's own machine (loopback) are refused unless the operator allows them (tether serve --allow-loopback-webhooks)")
		}
		return nil
	}
	if u.Scheme != "https" {
		return errors.New("webhook.url must use https (http only for loopback, where the operator allows it)")
	}
	if isIP {
		if ip.Is6() {
			return errors.New("IPv6 webhook hosts are not accepted")
		}
		if !allowedAddr(ip, false) {
			return errors.New("webhook.url must not target private, link-local or special-purpose addresses")
		}
	}
	return nil
}

// special are ranges that are not reachable public unicast addresses, or
// that lead to private ones, beyond what netip.Addr's predicates say.
var special = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"100.64.0.0/10",   // shared address space (carrier-grade NAT; also some clouds' metadata)
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"240.0.0.0/4",     // reserved, and broadcast
		"64:ff9b::/96",    // NAT64: embeds an IPv4 address
		"64:ff9b:1::/48",  // local NAT64
		"100::/64",        // discard
		"2001::/32",       // Teredo
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4: embeds an IPv4 address
		"fec0::/10",       // site-local (deprecated)
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// allowedAddr reports whether a webhook may be delivered to ip: a public
// unicast address, or loopback if loopback is allowed.
func allowedAddr(ip netip.Addr, loopback bool) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return loopback
	}
	if !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range special {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// webhookClient returns the client that delivers notifications. Its dialer
// checks every address it connects to (after name resolution, so DNS
// rebinding cannot get around the check made when the subscription was
// made), it uses no proxy, and it follows no redirect.
func webhookClient(timeout time.Duration, loopback bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if !allowedAddr(ap.Addr(), loopback) {
			return errors.New("webhook address refused: " + ap.Addr().String() + " is not a public address")
		}
		return nil
	}}
	tr := &http.Transport{
		DialContext:           func(ctx context.Context, n, a string) (net.Conn, error) { return d.DialContext(ctx, n, a) },
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
