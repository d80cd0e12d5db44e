package main

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// publicURL returns the server's URL as clients and webhook receivers
// reach it, which Durable Streams Location headers and webhook callback
// URLs are built from (never from a request's Host header, which the
// requester chooses): --public-url if set, else http:// and the address
// listened on, unless that is every interface (0.0.0.0, ::), which names
// no host: then none.
func publicURL(flag string, addr net.Addr) (string, error) {
	if flag != "" {
		u, err := url.Parse(flag)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return "", errors.New("--public-url must be an http or https URL with a host and no query, like https://tether.example.com")
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok || ta.IP.IsUnspecified() {
		return "", nil
	}
	return "http://" + ta.String(), nil
}
