package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// rawConn is one keep-alive HTTP/1.1 connection that sends the bench's
// appends: the request goes out in one write from a prebuilt head and the
// answer is parsed in place. The load generator shares the machine with
// the server, and net/http's client took about 1.5 times the CPU per
// request (its pool, its request copy, its goroutines), CPU the server
// would otherwise get.
type rawConn struct {
	a   *apiClient
	c   net.Conn
	br  *bufio.Reader
	req []byte
}

func (a *apiClient) rawConn() *rawConn { return &rawConn{a: a} }

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

// buildHead returns the request line and headers of p, up to
// "Content-Length: ".
func (p *prepared) buildHead() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", p.method, p.u.RequestURI(), p.u.Host)
	for k, vs := range p.h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("Content-Length: ")
	return b.Bytes()
}

// send is apiClient.send over rc.
func (rc *rawConn) send(p *prepared, body []byte, resp *bytes.Buffer) (int, error) {
	if rc.c == nil {
		c, err := rc.a.dial(context.Background(), p.u)
		if err != nil {
			return 0, err
		}
		rc.c, rc.br = c, bufio.NewReaderSize(c, 16<<10)
	}
	rc.req = append(rc.req[:0], p.rawHead...)
	rc.req = strconv.AppendInt(rc.req, int64(len(body)), 10)
	rc.req = append(rc.req, "\r\n\r\n"...)
	rc.req = append(rc.req, body...)
	_ = rc.c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := rc.c.Write(rc.req); err != nil {
		rc.close()
		return 0, rc.a.transportErr(err)
	}
	status, keep, err := readResponse(rc.br, resp)
	if err != nil {
		rc.close()
		return 0, rc.a.transportErr(err)
	}
	if !keep {
		rc.close()
	}
	return status, nil
}

// dial opens a connection to the server of u.
func (a *apiClient) dial(ctx context.Context, u *url.URL) (net.Conn, error) {
	return a.dialFrom(ctx, u, nil)
}

// dialFrom dials from a local address (nil: the system's choice). Beyond
// the ~28,000 ports of one source address, connections to one server need
// several (127.0.0.x on loopback).
func (a *apiClient) dialFrom(ctx context.Context, u *url.URL, local net.IP) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	c, err := localDialer(local).DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, a.transportErr(&net.OpError{Op: "dial", Net: "tcp", Err: err})
	}
	if u.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: u.Hostname()})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, a.transportErr(err)
		}
		c = tc
	}
	return c, nil
}

// readResponse reads one HTTP/1.1 response into body. keep reports
// whether the connection may carry another request.
func readResponse(br *bufio.Reader, body *bytes.Buffer) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("not an HTTP/1.x answer: %q", bytes.TrimSpace(line))
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, false, fmt.Errorf("bad status line %q", bytes.TrimSpace(line))
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqual(name, "content-length"):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case asciiEqual(name, "transfer-encoding"):
			chunked = asciiEqual(value, "chunked")
		case asciiEqual(name, "connection"):
			if asciiEqual(value, "close") {
				keep = false
			}
		}
	}
	body.Reset()
	switch {
	case chunked:
		for {
			line, err = br.ReadSlice('\n')
			if err != nil {
				return 0, false, err
			}
			size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
			n, err := strconv.ParseInt(string(size), 16, 64)
			if err != nil || n < 0 {
				return 0, false, fmt.Errorf("bad chunk size %q", size)
			}
			if n == 0 {
				for { // trailers
					line, err = br.ReadSlice('\n')
					if err != nil {
						return 0, false, err
					}
					if len(bytes.TrimRight(line, "\r\n")) == 0 {
						return status, keep, nil
					}
				}
			}
			if _, err := io.CopyN(body, br, n+2); err != nil {
				return 0, false, err
			}
			body.Truncate(body.Len() - 2)
		}
	case length >= 0:
		if _, err := io.CopyN(body, br, length); err != nil {
			return 0, false, err
		}
	case status == http.StatusNoContent || status == http.StatusNotModified:
	default: // the body ends with the connection
		_, err := body.ReadFrom(br)
		return status, false, err
	}
	return status, keep, nil
}

func asciiEqual(b []byte, s string) bool {
	return len(b) == len(s) && strings.EqualFold(string(b), s)
}

// localDialer dials from local (nil: the system's choice).
func localDialer(local net.IP) *net.Dialer {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	return d
}
