package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	tether "github.com/tetherhq/tether"
)

// CreateThread creates a thread (POST /v1/threads). An empty id makes a
// new one (thr_ and 26 characters, as the server's), chosen by the client
// so that the request is a create-if-absent: a retry after a failure that
// may hide a creation (a transport error, a 5xx) returns the thread it
// made, never a second one. metadata is encoded as JSON; nil sends none.
// Creating a thread that exists with the same metadata returns it; with
// other metadata it returns a conflict error.
func (c *Client) CreateThread(ctx context.Context, id string, metadata any) (tether.Thread, error) {
	if id == "" {
		id = tether.NewID("thr_")
	}
	body := struct {
		ID       string `json:"id"`
		Metadata any    `json:"metadata,omitempty"`
	}{id, metadata}
	var th tether.Thread
	err := c.do(ctx, call{op: "create thread", method: http.MethodPost, path: "/v1/threads", body: body,
		valid: func() bool { return th.ID != "" }}, &th)
	return th, err
}

// Thread returns the snapshot of a thread (GET /v1/threads/{id}): its runs
// and messages as of the snapshot's offset. It returns a not_found error
// for an unknown thread.
func (c *Client) Thread(ctx context.Context, id string) (*tether.Snapshot, error) {
	var s tether.Snapshot
	if err := c.do(ctx, call{op: "get thread", method: http.MethodGet, path: "/v1/threads/" + escape(id),
		valid: func() bool { return s.Thread.ID != "" }}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ThreadQuery selects threads for [Client.Threads]. Zero fields are not
// sent, leaving the server's defaults.
type ThreadQuery struct {
	// Status keeps only threads with this status.
	Status tether.ThreadStatus
	// Limit is the page size.
	Limit int
	// Cursor is the next cursor of the previous page; empty for the first.
	Cursor string
}

// Threads lists threads, one page at a time (GET /v1/threads). next is the
// cursor of the next page, empty after the last page.
func (c *Client) Threads(ctx context.Context, q ThreadQuery) (threads []tether.Thread, next string, err error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var out struct {
		Threads    []tether.Thread `json:"threads"`
		NextCursor string          `json:"next_cursor"`
	}
	if err := c.do(ctx, call{op: "list threads", method: http.MethodGet, path: "/v1/threads", query: v,
		valid: func() bool { return out.Threads != nil }}, &out); err != nil {
		return nil, "", err
	}
	return out.Threads, out.NextCursor, nil
}

// DeleteThread deletes a thread and its log (DELETE /v1/threads/{id}). It
// returns a not_found error for an unknown thread, but when a try whose
// outcome is unknown (a 5xx, a dropped connection) came first: the delete
// may have been done then, so a retry that finds no thread returns nil.
func (c *Client) DeleteThread(ctx context.Context, id string) error {
	return c.do(ctx, call{op: "delete thread", method: http.MethodDelete, path: "/v1/threads/" + escape(id), goneIsDone: true}, nil)
}

// FinalAnswer returns the text of the last assistant message of the
// thread's latest run (GET /v1/threads/{id}/final-answer). Complete is
// false while that run is still going. It returns a not_found error for an
// unknown thread.
func (c *Client) FinalAnswer(ctx context.Context, threadID string) (*tether.FinalAnswer, error) {
	var fa tether.FinalAnswer
	if err := c.do(ctx, call{op: "get final answer", method: http.MethodGet, path: "/v1/threads/" + escape(threadID) + "/final-answer"}, &fa); err != nil {
		return nil, err
	}
	return &fa, nil
}
