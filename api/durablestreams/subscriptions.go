package durablestreams

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tetherhq/tether/internal/bearer"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// wakeStatus maps the subscription APIs' error codes to HTTP statuses.
var wakeStatus = map[string]int{
	wake.CodeInvalidRequest:       http.StatusBadRequest,
	wake.CodeSubscriptionNotFound: http.StatusNotFound,
	wake.CodeSubscriptionExists:   http.StatusConflict,
	wake.CodeWebhookURLRejected:   http.StatusBadRequest,
	wake.CodeTokenInvalid:         http.StatusUnauthorized,
	wake.CodeTokenExpired:         http.StatusUnauthorized,
	wake.CodeFenced:               http.StatusConflict,
	wake.CodeAlreadyClaimed:       http.StatusConflict,
	wake.CodeNoPendingWork:        http.StatusConflict,
	wake.CodeInvalidOffset:        http.StatusConflict,
	wake.CodeUnavailable:          http.StatusServiceUnavailable,
}

// subscriptions serves the reserved subscription APIs under __ds/.
func (h *Handler) subscriptions(w http.ResponseWriter, r *http.Request) {
	m := h.opts.Wake
	rest := strings.TrimPrefix(r.URL.EscapedPath(), Prefix+streams.ReservedPrefix)
	if rest == "/jwks.json" {
		if r.Method != http.MethodGet {
			methodNotAllowed(w, r, "GET")
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_ = json.NewEncoder(w).Encode(m.JWKS())
		return
	}
	segs := strings.Split(strings.TrimPrefix(rest, "/subscriptions/"), "/")
	if !strings.HasPrefix(rest, "/subscriptions/") || segs[0] == "" {
		wakeError(w, &wake.Error{Code: wake.CodeSubscriptionNotFound, Message: "no such control route"})
		return
	}
	id, err := url.PathUnescape(segs[0])
	if err != nil {
		wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "the subscription id is malformed"})
		return
	}
	switch {
	case len(segs) == 1:
		h.subscription(w, r, id)
	case segs[1] == "streams" && len(segs) == 2:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		var body struct {
			Streams []string `json:"streams"`
		}
		if err := readJSON(r, &body); err != nil || len(body.Streams) == 0 || slicesHasEmpty(body.Streams) {
			wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "streams must be a non-empty array of non-empty strings"})
			return
		}
		wakeAnswer(w, http.StatusNoContent, nil, m.AddStreams(id, body.Streams))
	case segs[1] == "streams":
		if r.Method != http.MethodDelete {
			methodNotAllowed(w, r, "DELETE")
			return
		}
		p, err := url.PathUnescape(strings.Join(segs[2:], "/"))
		if err != nil {
			wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "the stream path is malformed"})
			return
		}
		wakeAnswer(w, http.StatusNoContent, nil, m.RemoveStream(id, p))
	case len(segs) == 2 && (segs[1] == "callback" || segs[1] == "claim" || segs[1] == "ack" || segs[1] == "release"):
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		h.wakeAction(w, r, id, segs[1])
	default:
		wakeError(w, &wake.Error{Code: wake.CodeSubscriptionNotFound, Message: "no such control route"})
	}
}

// subscription serves PUT, GET and DELETE of one subscription.
func (h *Handler) subscription(w http.ResponseWriter, r *http.Request, id string) {
	m := h.opts.Wake
	switch r.Method {
	case http.MethodPut:
		var body struct {
			Type    string   `json:"type"`
			Pattern string   `json:"pattern"`
			Streams []string `json:"streams"`
			Webhook *struct {
				URL string `json:"url"`
			} `json:"webhook"`
			WakeStream  string   `json:"wake_stream"`
			LeaseTTLMS  *float64 `json:"lease_ttl_ms"`
			Description *string  `json:"description"`
		}
		if err := readJSON(r, &body); err != nil {
			wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "the body must be a JSON object of a subscription"})
			return
		}
		req := wake.CreateRequest{Type: body.Type, Pattern: body.Pattern, Streams: body.Streams, WakeStream: body.WakeStream,
			LeaseTTL: wake.DefaultLeaseTTL, Description: body.Description}
		if body.Webhook != nil {
			req.WebhookURL = body.Webhook.URL
		}
		if body.LeaseTTLMS != nil {
			v := *body.LeaseTTLMS
			if v != math.Trunc(v) || v < 0 || v > float64(math.MaxInt32) {
				wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "lease_ttl_ms must be an integer from 1000 to 600000"})
				return
			}
			req.LeaseTTL = time.Duration(v) * time.Millisecond
		}
		sub, created, err := m.Create(id, req)
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		wakeAnswer(w, status, sub, err)
	case http.MethodGet:
		sub, err := m.Get(id)
		wakeAnswer(w, http.StatusOK, sub, err)
	case http.MethodDelete:
		wakeAnswer(w, http.StatusNoContent, nil, m.Delete(id))
	default:
		methodNotAllowed(w, r, "PUT, GET, DELETE")
	}
}

// wakeAction serves a callback, claim, ack or release.
func (h *Handler) wakeAction(w http.ResponseWriter, r *http.Request, id, action string) {
	m := h.opts.Wake
	if action == "claim" {
		var body struct {
			Worker string `json:"worker"`
		}
		if err := readJSON(r, &body); err != nil {
			wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "worker must be a non-empty string"})
			return
		}
		res, err := m.Claim(id, body.Worker)
		wakeAnswer(w, http.StatusOK, res, err)
		return
	}
	token, ok := bearer.Token(r.Header.Get("Authorization"))
	if !ok || token == "" {
		wakeError(w, &wake.Error{Code: wake.CodeTokenInvalid, Message: "missing or malformed Authorization header"})
		return
	}
	// Before the body: a request without a wake's token (and so without
	// any credential) neither waits for its body nor holds the server's
	// budget of bodies in flight while it does.
	if err := m.CheckToken(id, token); err != nil {
		wakeError(w, err)
		return
	}
	var req wake.AckRequest
	if err := readJSON(r, &req); err != nil {
		wakeError(w, &wake.Error{Code: wake.CodeInvalidRequest, Message: "the body must be a JSON object"})
		return
	}
	switch action {
	case "callback":
		res, err := m.Callback(id, token, req)
		wakeAnswer(w, http.StatusOK, res, err)
	case "ack":
		res, err := m.Ack(id, token, req)
		wakeAnswer(w, http.StatusOK, res, err)
	case "release":
		wakeAnswer(w, http.StatusNoContent, nil, m.Release(id, token, req))
	}
}

// readJSON decodes a small JSON body (an empty body is {}).
func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		b = []byte("{}")
	}
	return json.Unmarshal(b, v)
}

func slicesHasEmpty(ss []string) bool {
	for _, s := range ss {
		if s == "" {
			return true
		}
	}
	return false
}

// wakeAnswer answers with v (or no body for 204), or with err.
func wakeAnswer(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		wakeError(w, err)
		return
	}
	if status == http.StatusNoContent || v == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// wakeError answers with a subscription API error: {"error": {"code", …}}.
func wakeError(w http.ResponseWriter, err error) {
	var we *wake.Error
	if !errors.As(err, &we) {
		we = &wake.Error{Code: wake.CodeUnavailable, Message: "the server could not do this; retry"}
	}
	status, ok := wakeStatus[we.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]*wake.Error{"error": we})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "method %s is not allowed here", r.Method))
}
