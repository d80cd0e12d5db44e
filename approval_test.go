package tether

import (
	"encoding/json"
	"testing"
)

// TestReadApproval: only an explicit yes approves; a denial's reason is
// its own (the message, a person's words), none for a plain no.
func TestReadApproval(t *testing.T) {
	for _, c := range []struct {
		in       string
		approved bool
		reason   string
	}{
		{`true`, true, ""},
		{`false`, false, ""},
		{`{"approved":true}`, true, ""},
		{`{"approved":true,"message":"fine"}`, true, ""},
		{`{"approved":false,"message":"Not now."}`, false, "Not now."},
		{`{"approved":false,"message":"  "}`, false, ""},
		{`{"approved":"yes"}`, false, ""},
		{`" Yes "`, true, ""},
		{`"allow"`, true, ""},
		{`"no"`, false, ""},
		{`""`, false, ""},
		{`"not that file"`, false, "not that file"},
		{`null`, false, ""},
		{`1`, false, ""},
		{`[true]`, false, ""},
	} {
		approved, reason := ReadApproval(json.RawMessage(c.in))
		if approved != c.approved || reason != c.reason {
			t.Errorf("ReadApproval(%s) = %v, %q; want %v, %q", c.in, approved, reason, c.approved, c.reason)
		}
	}
}

// TestApprovalCall: the call an approval request names, "" for another
// kind or a payload that names none.
func TestApprovalCall(t *testing.T) {
	for _, c := range []struct {
		req  *Request
		want string
	}{
		{&Request{Kind: RequestApproval, Payload: json.RawMessage(`{"prompt":"Allow?","tool":"search","args":{},"call_id":"c1"}`)}, "c1"},
		{&Request{Kind: "input", Payload: json.RawMessage(`{"call_id":"c1"}`)}, ""},
		{&Request{Kind: RequestApproval, Payload: json.RawMessage(`{"action":"delete"}`)}, ""},
		{&Request{Kind: RequestApproval, Payload: json.RawMessage(`"c1"`)}, ""},
		{&Request{Kind: RequestApproval}, ""},
		{nil, ""},
	} {
		if got := ApprovalCall(c.req); got != c.want {
			t.Errorf("ApprovalCall(%+v) = %q, want %q", c.req, got, c.want)
		}
	}
}
