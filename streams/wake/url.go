package wake

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// checkWebhookURL accepts https URLs of public hosts, and http URLs of
// localhost or 127.x.x.x (for development). Private, link-local and IPv6
// literal hosts are refused, so that a subscription cannot make the server
// call into the network it sits in.
func checkWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("webhook.url must be an absolute URL")
	}
	host := strings.ToLower(u.Hostname())
	switch u.Scheme {
	case "http":
		if host == "localhost" || isLoopback4(host) {
			return nil
		}
		return errors.New("http webhook URLs are only allowed for localhost or 127.x.x.x")
	case "https":
	default:
		return errors.New("webhook.url must use https")
	}
	if host == "localhost" {
		return errors.New("localhost webhook URLs must use http")
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.To4() == nil {
			return errors.New("IPv6 webhook hosts are not accepted")
		}
		if !publicIP(ip) {
			return errors.New("webhook.url must not target private or link-local hosts")
		}
	}
	return nil
}

func isLoopback4(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.To4() != nil && ip.IsLoopback()
}

// publicIP reports whether ip is a public unicast address.
func publicIP(ip net.IP) bool {
	return !(ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast())
}

// webhookClient returns the client that delivers notifications. Its dialer
// refuses private and link-local addresses (a public name may resolve to
// one), except loopback, which development URLs use.
func webhookClient(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil || !(ip.IsLoopback() || publicIP(ip)) {
			return errors.New("webhook address refused: not a public address")
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
