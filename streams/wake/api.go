package wake

import (
	"errors"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/streams"
)

// CreateRequest is a subscription as a PUT asks for it.
type CreateRequest struct {
	Type string
	// Pattern follows every stream whose path matches it (Match); Streams
	// are followed explicitly. At least one is needed.
	Pattern string
	Streams []string
	// WebhookURL is where a webhook subscription is notified.
	WebhookURL string
	// WakeStream is where a pull-wake subscription writes its wake events.
	WakeStream string
	// LeaseTTL is how long a wake is held without an acknowledgement.
	LeaseTTL    time.Duration
	Description *string
}

// Subscription is a subscription as clients see it.
type Subscription struct {
	ID             string       `json:"id"`
	SubscriptionID string       `json:"subscription_id"`
	Type           string       `json:"type"`
	Pattern        string       `json:"pattern,omitempty"`
	Streams        []LinkInfo   `json:"streams"`
	Webhook        *WebhookInfo `json:"webhook,omitempty"`
	WakeStream     string       `json:"wake_stream,omitempty"`
	LeaseTTLMS     int64        `json:"lease_ttl_ms"`
	CreatedAt      tether.Time  `json:"created_at"`
	Status         string       `json:"status"`
	Description    *string      `json:"description,omitempty"`
}

// LinkInfo is a followed stream in a Subscription.
type LinkInfo struct {
	Path        string `json:"path"`
	LinkType    string `json:"link_type"`
	AckedOffset string `json:"acked_offset"`
}

// WebhookInfo is where a webhook subscription is notified and how its
// notifications are signed.
type WebhookInfo struct {
	URL     string      `json:"url"`
	Signing SigningInfo `json:"signing"`
}

// SigningInfo names the key that signs notifications.
type SigningInfo struct {
	Alg     string `json:"alg"`
	Kid     string `json:"kid"`
	JWKSURL string `json:"jwks_url"`
}

// normalize trims the slashes around a stream path.
func normalize(p string) string { return strings.Trim(p, "/") }

// Create creates a subscription, or confirms one with the same
// configuration (created false). Errors: INVALID_REQUEST,
// WEBHOOK_URL_REJECTED, SUBSCRIPTION_ALREADY_EXISTS (another
// configuration).
func (m *Manager) Create(id string, req CreateRequest) (*Subscription, bool, error) {
	switch {
	case id == "" || len(id) > 255:
		return nil, false, errorf(CodeInvalidRequest, "a subscription id must be 1 to 255 bytes")
	case req.Type != TypeWebhook && req.Type != TypePullWake:
		return nil, false, errorf(CodeInvalidRequest, `type must be "webhook" or "pull-wake"`)
	case req.Pattern == "" && len(req.Streams) == 0:
		return nil, false, errorf(CodeInvalidRequest, "at least one of pattern or streams is required")
	case req.LeaseTTL < MinLeaseTTL || req.LeaseTTL > MaxLeaseTTL:
		return nil, false, errorf(CodeInvalidRequest, "lease_ttl_ms must be an integer from 1000 to 600000")
	case req.Type == TypeWebhook && req.WebhookURL == "":
		return nil, false, errorf(CodeInvalidRequest, "webhook subscriptions require webhook.url")
	case req.Type == TypePullWake && req.WakeStream == "":
		return nil, false, errorf(CodeInvalidRequest, "pull-wake subscriptions require wake_stream")
	}
	req.Pattern = normalize(req.Pattern)
	req.WakeStream = normalize(req.WakeStream)
	for i, s := range req.Streams {
		req.Streams[i] = normalize(s)
	}
	hash := configHash(&req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.subs[id]; s != nil {
		if s.rec.ConfigHash != hash {
			return nil, false, errorf(CodeSubscriptionExists, "the subscription exists with another configuration")
		}
		return m.view(s), false, nil
	}
	if req.Type == TypeWebhook {
		if err := checkWebhookURL(req.WebhookURL, m.opts.AllowLoopback); err != nil {
			return nil, false, errorf(CodeWebhookURLRejected, "%s", err.Error())
		}
		if m.opts.BaseURL == "" {
			return nil, false, errorf(CodeWebhookURLRejected, "this server has no public URL to send webhook receivers their callback URL (tether serve --public-url)")
		}
	}
	s := &sub{status: "active", rec: record{ID: id, Type: req.Type, Pattern: req.Pattern, WebhookURL: req.WebhookURL,
		WakeStream: req.WakeStream, LeaseTTLMS: req.LeaseTTL.Milliseconds(), Description: req.Description,
		CreatedAt: tether.At(m.opts.Now()), ConfigHash: hash, Links: make(map[string]*link)}}
	for _, p := range req.Streams {
		s.link(p, true, m.tail(p))
	}
	if req.Pattern != "" {
		err := m.svc.Paths(m.ctx, func(p string) {
			if Match(req.Pattern, p) {
				s.link(p, false, "")
			}
		})
		if err != nil {
			return nil, false, errorf(CodeUnavailable, "the streams could not be listed; retry")
		}
		for p, l := range s.rec.Links {
			if l.Acked == "" {
				l.Acked = m.tail(p)
			}
		}
	}
	if err := m.put(s, true); err != nil {
		return nil, false, errorf(CodeUnavailable, "the subscription could not be stored; retry")
	}
	m.subs[id] = s
	return m.view(s), true, nil
}

// link follows a stream (explicitly or by pattern) from acked.
func (s *sub) link(path string, explicit bool, acked string) {
	l := s.rec.Links[path]
	if l == nil {
		l = &link{Acked: acked}
		s.rec.Links[path] = l
	}
	if explicit {
		l.Explicit = true
	} else {
		l.Glob = true
	}
}

// Get returns a subscription. Error: SUBSCRIPTION_NOT_FOUND.
func (m *Manager) Get(id string) (*Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[id]
	if s == nil {
		return nil, errorf(CodeSubscriptionNotFound, "subscription not found")
	}
	return m.view(s), nil
}

// view is s as clients see it. m.mu is held.
func (m *Manager) view(s *sub) *Subscription {
	v := &Subscription{ID: s.rec.ID, SubscriptionID: s.rec.ID, Type: s.rec.Type, Pattern: s.rec.Pattern,
		WakeStream: s.rec.WakeStream, LeaseTTLMS: s.rec.LeaseTTLMS, CreatedAt: s.rec.CreatedAt, Status: s.status,
		Description: s.rec.Description, Streams: []LinkInfo{}}
	for _, in := range m.infos(s) {
		v.Streams = append(v.Streams, LinkInfo{Path: in.Path, LinkType: in.LinkType, AckedOffset: in.AckedOffset})
	}
	if s.rec.Type == TypeWebhook {
		v.Webhook = &WebhookInfo{URL: s.rec.WebhookURL, Signing: SigningInfo{Alg: "ed25519", Kid: m.keys.kid, JWKSURL: m.jwksURL()}}
	}
	return v
}

// Delete deletes a subscription (if it exists).
func (m *Manager) Delete(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[id]
	if s == nil {
		return nil
	}
	m.endWake(s)
	stopTimer(&s.retry)
	delete(m.subs, id)
	if err := m.st.DeleteThread(m.ctx, Namespace+":"+id); err != nil {
		m.log.Warn("delete a subscription", "subscription", id, "err", err)
	}
	return nil
}

// AddStreams follows streams explicitly, from their tails. Error:
// SUBSCRIPTION_NOT_FOUND.
func (m *Manager) AddStreams(id string, paths []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[id]
	if s == nil {
		return errorf(CodeSubscriptionNotFound, "subscription not found")
	}
	for _, p := range paths {
		p = normalize(p)
		s.link(p, true, m.tail(p))
	}
	m.save(s)
	return nil
}

// RemoveStream stops following a stream explicitly (a pattern may still
// follow it). Error: SUBSCRIPTION_NOT_FOUND.
func (m *Manager) RemoveStream(id, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[id]
	if s == nil {
		return errorf(CodeSubscriptionNotFound, "subscription not found")
	}
	path = normalize(path)
	if l := s.rec.Links[path]; l != nil {
		l.Explicit = false
		if !l.Glob {
			delete(s.rec.Links, path)
		}
		m.save(s)
	}
	return nil
}

// Ack is an acknowledgement of a stream up to an offset.
type Ack struct {
	Stream string `json:"stream,omitempty"`
	Path   string `json:"path,omitempty"`
	Offset string `json:"offset"`
}

// AckRequest is a webhook callback or a pull-wake ack or release.
type AckRequest struct {
	WakeID     string `json:"wake_id"`
	Generation int64  `json:"generation"`
	Acks       []Ack  `json:"acks"`
	Done       bool   `json:"done"`
}

// AckResult answers an acknowledgement: next_wake says a new wake started
// at once (more data is pending).
type AckResult struct {
	OK       bool `json:"ok"`
	NextWake bool `json:"next_wake"`
}

// Callback acknowledges a webhook wake, with the wake's token. Errors:
// SUBSCRIPTION_NOT_FOUND, TOKEN_INVALID, TOKEN_EXPIRED, FENCED (a wake
// that ended), INVALID_OFFSET.
func (m *Manager) Callback(id, token string, req AckRequest) (*AckResult, error) {
	return m.ack(id, token, req, "")
}

// Ack acknowledges a claimed pull-wake; see Callback.
func (m *Manager) Ack(id, token string, req AckRequest) (*AckResult, error) {
	return m.ack(id, token, req, TypePullWake)
}

func (m *Manager) ack(id, token string, req AckRequest, typ string) (*AckResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.checkWake(id, token, req, typ)
	if err != nil {
		return nil, err
	}
	type change struct {
		l      *link
		offset string
	}
	var changes []change
	for _, a := range req.Acks {
		p := a.Stream
		if normalize(p) == "" {
			p = a.Path
		}
		l := s.rec.Links[p]
		if l == nil {
			// Named as the wake names it (a pattern follows a stream
			// under its own path, a slash at its end included), or as
			// it was asked to be followed (trimmed of slashes).
			p = normalize(p)
			l = s.rec.Links[p]
		}
		switch {
		case p == "" || l == nil:
			return nil, errorf(CodeInvalidOffset, "the ack names a stream the subscription does not follow")
		case a.Offset == streams.OffsetStart || !isOffset(a.Offset):
			// Acked offsets are compared as strings: a string that is
			// no offset may sort anywhere, and would stay as the ack.
			return nil, errorf(CodeInvalidOffset, "an ack offset must be an offset of the stream")
		case a.Offset < l.Acked:
			return nil, errorf(CodeInvalidOffset, "the ack offset goes back")
		case a.Offset > m.tail(p):
			return nil, errorf(CodeInvalidOffset, "the ack offset is past the stream's tail")
		}
		changes = append(changes, change{l, a.Offset})
	}
	for _, c := range changes {
		c.l.Acked = c.offset
	}
	if len(changes) > 0 {
		m.save(s)
	}
	m.extendLease(s)
	res := &AckResult{OK: true}
	if req.Done {
		m.endWake(s)
		res.NextWake = m.triggerNext(s)
	}
	return res, nil
}

// checkWake checks a wake token and that it is for s's current wake. m.mu
// is held.
func (m *Manager) checkWake(id, token string, req AckRequest, typ string) (*sub, error) {
	s, gen, err := m.checkTokenLocked(id, token)
	if err != nil {
		return nil, err
	}
	if typ != "" && s.rec.Type != typ {
		return nil, errorf(CodeInvalidRequest, "the subscription is not %s", typ)
	}
	if gen != s.rec.Generation || req.Generation != s.rec.Generation || req.WakeID != s.wakeID || s.wakeID == "" {
		return nil, errorf(CodeFenced, "the wake generation is stale")
	}
	return s, nil
}

// CheckToken checks a callback's, ack's or release's bearer token before
// its body is read: these requests need no API key, so a request whose
// token is not one of the subscription's wakes must be refused before the
// server waits for, or holds, the body it announces. Errors:
// SUBSCRIPTION_NOT_FOUND, TOKEN_INVALID, TOKEN_EXPIRED.
func (m *Manager) CheckToken(id, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, err := m.checkTokenLocked(id, token)
	return err
}

// checkTokenLocked returns the subscription id names and the generation
// of token, a wake token of it. m.mu is held.
func (m *Manager) checkTokenLocked(id, token string) (*sub, int64, error) {
	s := m.subs[id]
	if s == nil {
		return nil, 0, errorf(CodeSubscriptionNotFound, "subscription not found")
	}
	gen, err := m.keys.check(token, id, m.opts.Now())
	switch {
	case errors.Is(err, errTokenExpired):
		return nil, 0, errorf(CodeTokenExpired, "the token expired")
	case err != nil:
		return nil, 0, errorf(CodeTokenInvalid, "the token is invalid")
	}
	return s, gen, nil
}

// ClaimResult is a claimed pull-wake.
type ClaimResult struct {
	WakeID     string       `json:"wake_id"`
	Generation int64        `json:"generation"`
	Token      string       `json:"token"`
	Streams    []StreamInfo `json:"streams"`
	LeaseTTLMS int64        `json:"lease_ttl_ms"`
}

// Claim gives a worker the pending wake of a pull-wake subscription, under
// a lease. Errors: SUBSCRIPTION_NOT_FOUND, INVALID_REQUEST,
// ALREADY_CLAIMED (with the holder), NO_PENDING_WORK.
func (m *Manager) Claim(id, worker string) (*ClaimResult, error) {
	if worker == "" {
		return nil, errorf(CodeInvalidRequest, "worker must be a non-empty string")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[id]
	switch {
	case s == nil:
		return nil, errorf(CodeSubscriptionNotFound, "subscription not found")
	case s.rec.Type != TypePullWake:
		return nil, errorf(CodeInvalidRequest, "the subscription is not pull-wake")
	case s.holder != "":
		e := errorf(CodeAlreadyClaimed, "the wake is claimed")
		e.CurrentHolder, e.Generation = s.holder, s.rec.Generation
		return nil, e
	case !m.hasPending(s):
		return nil, errorf(CodeNoPendingWork, "the subscription has no pending work")
	}
	if s.wakeID == "" {
		m.wake(s)
	}
	s.holder = worker
	s.token = m.keys.token(id, s.rec.Generation, m.opts.Now())
	m.extendLease(s)
	return &ClaimResult{WakeID: s.wakeID, Generation: s.rec.Generation, Token: s.token, Streams: m.infos(s),
		LeaseTTLMS: s.rec.LeaseTTLMS}, nil
}

// Release gives a claimed wake back without acknowledging it; a new wake
// starts if data is pending. Errors: as Ack.
func (m *Manager) Release(id, token string, req AckRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.checkWake(id, token, req, TypePullWake)
	if err != nil {
		return err
	}
	m.endWake(s)
	m.triggerNext(s)
	return nil
}

// isOffset reports whether s is an offset as this server writes them.
func isOffset(s string) bool {
	_, _, err := tether.ParseOffset(tether.Offset(s))
	return err == nil
}
