package client

import (
	"context"
	"net/http"

	tether "github.com/tetherhq/tether"
)

// RunRequest is a new run for [Client.CreateRun].
type RunRequest struct {
	// Agent names the agent that runs it.
	Agent string
	// Input is the run's input messages; they become messages of the
	// thread.
	Input tether.RunInput
	// Metadata is encoded as JSON and stored with the run; nil sends none.
	Metadata any
	// Multitask says what to do if the thread already has an active run.
	// Empty leaves the server's default (reject).
	Multitask tether.Multitask
	// IdempotencyKey makes a repeated request return the first run instead
	// of starting another. Empty makes one up for this call, which covers
	// the client's own retries; set it to cover retries of your own.
	IdempotencyKey string
}

// CreateRun starts a run on a thread (POST /v1/threads/{tid}/runs).
// Transport errors, 5xx and 429 answers are retried up to 4 times with
// backoff, all with the same Idempotency-Key, so that a retry never starts
// a second run. A thread with an active run gives a run_active error
// (unless Multitask says otherwise); an unknown thread, not_found.
func (c *Client) CreateRun(ctx context.Context, threadID string, req RunRequest) (tether.Run, error) {
	body := struct {
		Agent     string           `json:"agent"`
		Input     tether.RunInput  `json:"input"`
		Metadata  any              `json:"metadata,omitempty"`
		Multitask tether.Multitask `json:"multitask,omitempty"`
	}{req.Agent, req.Input, req.Metadata, req.Multitask}
	key := req.IdempotencyKey
	if key == "" {
		key = tether.NewID("idem_")
	}
	var run tether.Run
	err := c.do(ctx, call{
		op:     "create run",
		method: http.MethodPost,
		path:   "/v1/threads/" + escape(threadID) + "/runs",
		body:   body,
		header: http.Header{"Idempotency-Key": {key}},
		valid:  func() bool { return run.ID != "" },
	}, &run)
	return run, err
}

// Run returns a run and its messages (GET /v1/runs/{rid}) as a snapshot
// whose Runs holds the run alone and whose Thread holds only the run's
// thread id. It returns a not_found error for an unknown run.
func (c *Client) Run(ctx context.Context, runID string) (*tether.Snapshot, error) {
	var out struct {
		Run      tether.Run       `json:"run"`
		Messages []tether.Message `json:"messages"`
	}
	if err := c.do(ctx, call{op: "get run", method: http.MethodGet, path: "/v1/runs/" + escape(runID),
		valid: func() bool { return out.Run.ID != "" }}, &out); err != nil {
		return nil, err
	}
	return &tether.Snapshot{
		Thread:   tether.Thread{ID: out.Run.ThreadID},
		Runs:     []tether.Run{out.Run},
		Messages: out.Messages,
	}, nil
}

// CancelRun asks the server to cancel a run (POST /v1/runs/{rid}/cancel)
// and returns the run as it is then. The run ends cancelled once its worker
// confirms or the server's cancel grace runs out: follow it with
// [Client.Subscribe] to see the end.
func (c *Client) CancelRun(ctx context.Context, runID string) (tether.Run, error) {
	var run tether.Run
	err := c.do(ctx, call{op: "cancel run", method: http.MethodPost, path: "/v1/runs/" + escape(runID) + "/cancel",
		valid: func() bool { return run.ID != "" }}, &run)
	return run, err
}

// SubmitInput answers the request a waiting run made (run.waiting) with
// value, encoded as JSON (POST /v1/runs/{rid}/input). It returns a conflict
// error if the run is not waiting on that request and did not take this
// same answer to it. Transport errors, 5xx and 429 answers are retried like
// CreateRun's: the server knows a repeat of an answer it took (the same
// request id, the same value) for that answer, and a run never asks again
// under a request id it had answered, so a retry never answers another
// question.
func (c *Client) SubmitInput(ctx context.Context, runID, requestID string, value any) error {
	body := struct {
		RequestID string `json:"request_id"`
		Value     any    `json:"value"`
	}{requestID, value}
	return c.do(ctx, call{op: "submit input", method: http.MethodPost, path: "/v1/runs/" + escape(runID) + "/input", body: body}, nil)
}
