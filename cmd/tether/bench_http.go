package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	tether "github.com/tetherhq/tether"
)

// apiClient makes the bench's requests. It does not use package client:
// the load generator shares the machine with the server, so its requests
// are prebuilt and sent with as little work as possible, and it never
// retries (a failure is a result).
type apiClient struct {
	base  string
	token string
	// rest carries short requests; streams carries SSE responses, with a
	// larger read buffer.
	rest, streams *http.Transport
}

func newAPIClient(base, token string, conns int) *apiClient {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := func(readBuf int) *http.Transport {
		return &http.Transport{
			DialContext:           dialer.DialContext,
			MaxIdleConns:          0,
			MaxIdleConnsPerHost:   conns,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			DisableCompression:    true,
			ReadBufferSize:        readBuf,
		}
	}
	return &apiClient{base: base, token: token, rest: tr(0), streams: tr(64 << 10)}
}

func (a *apiClient) close() {
	a.rest.CloseIdleConnections()
	a.streams.CloseIdleConnections()
}

// header returns the headers of a request; extra is name, value pairs.
func (a *apiClient) header(extra ...string) http.Header {
	h := http.Header{}
	if a.token != "" {
		h.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

// prepared is a request sent many times: its URL is parsed and its headers
// built once.
type prepared struct {
	method  string
	u       *url.URL
	h       http.Header
	rawHead []byte // for rawConn
}

func (a *apiClient) prepare(method, path string, extra ...string) (*prepared, error) {
	u, err := url.Parse(a.base + path)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	if method == http.MethodPost {
		extra = append(extra, "Content-Type", "application/json")
	}
	p := &prepared{method: method, u: u, h: a.header(extra...)}
	p.rawHead = p.buildHead()
	return p, nil
}

// send sends p with body and reads the answer into buf. It returns the
// status, or an error if no answer came.
func (a *apiClient) send(ctx context.Context, p *prepared, body []byte, buf *bytes.Buffer) (int, error) {
	req := &http.Request{
		Method: p.method, URL: p.u, Host: p.u.Host, Header: p.h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	if ctx != context.Background() {
		req = req.WithContext(ctx)
	}
	res, err := a.rest.RoundTrip(req)
	if err != nil {
		return 0, a.transportErr(err)
	}
	defer res.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(res.Body); err != nil {
		return 0, a.transportErr(err)
	}
	return res.StatusCode, nil
}

// call sends a JSON request and decodes a 2xx answer into out (if not
// nil). Other answers are returned as errors with the server's code.
func (a *apiClient) call(ctx context.Context, method, path string, in, out any, extra ...string) (int, error) {
	p, err := a.prepare(method, path, extra...)
	if err != nil {
		return 0, err
	}
	var body []byte
	if in != nil {
		if body, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	var buf bytes.Buffer
	status, err := a.send(ctx, p, body, &buf)
	if err != nil {
		return 0, err
	}
	if status < 200 || status > 299 {
		return status, serverErr(status, buf.Bytes())
	}
	if out != nil && status != http.StatusNoContent {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			return status, fmt.Errorf("%s %s: the answer is not the expected JSON (is %s a Tether server?)", method, path, a.base)
		}
	}
	return status, nil
}

// ping checks that the server answers at all, so that a server that is
// down gives one clear error.
func (a *apiClient) ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := a.call(cctx, http.MethodGet, "/healthz", nil, nil)
	return err
}

// serverErr is the error of a non-2xx answer: the server's code and
// message when it sent the usual JSON error.
func serverErr(status int, body []byte) error {
	var e struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return &tether.Error{Code: tether.Code(e.Error.Code), Message: e.Error.Message}
	}
	return fmt.Errorf("HTTP %d %s", status, http.StatusText(status))
}

// transportErr turns a transport error into one line a person can act on.
func (a *apiClient) transportErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("cannot reach the server at %s: connection refused (is tether serve running?)", a.base)
		}
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			return fmt.Errorf("cannot open another connection: too many open files (raise ulimit -n)")
		}
		return fmt.Errorf("cannot reach the server at %s: %v", a.base, op.Err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("cannot reach the server at %s: %v", a.base, dns)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("the server at %s closed the connection", a.base)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the server at %s did not answer in time", a.base)
	}
	return fmt.Errorf("%s: %v", a.base, err)
}

// errKind is a short name for an error, to count errors by kind.
func errKind(err error) string {
	var te *tether.Error
	if errors.As(err, &te) {
		return string(te.Code)
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "connection refused"):
		return "connection refused"
	case strings.Contains(s, "closed the connection"):
		return "connection closed"
	case strings.Contains(s, "in time"):
		return "timeout"
	}
	return s
}

// duringBench names what failed.
func duringBench(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }
