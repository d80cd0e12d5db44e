package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// answer is an HTTP answer, or err when none came (the server is down,
// the connection was cut, the request timed out).
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

var hc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends one request; hdr holds name, value pairs.
func call(ctx context.Context, method, url string, body []byte, hdr ...string) answer {
	return callWith(ctx, hc, method, url, body, hdr...)
}

// callWith is call with another client.
func callWith(ctx context.Context, hc *http.Client, method, url string, body []byte, hdr ...string) answer {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := hc.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}
}

// retryable reports whether an answer leaves the outcome unknown: no
// answer, or 503.
func (a answer) retryable() bool { return a.err != nil || a.status == http.StatusServiceUnavailable }

// pause sleeps d or until ctx ends; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
