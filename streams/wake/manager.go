package wake

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/streams"
)

// Namespace is the store namespace of subscriptions: one row per
// subscription, "dssub:"+id, its record in the metadata.
const Namespace = "dssub"

// Limits of a subscription's lease (lease_ttl_ms).
const (
	DefaultLeaseTTL = 30 * time.Second
	MinLeaseTTL     = time.Second
	MaxLeaseTTL     = 10 * time.Minute
)

// maxRetryDelay caps the backoff of webhook deliveries.
const maxRetryDelay = time.Minute

// Options configure a Manager. The zero value is ready to use.
type Options struct {
	// SigningKey signs webhook notifications; the key of wake tokens is
	// derived from it. Defaults to a new key, so that signatures and tokens
	// do not survive a restart: keep one (tether serve keeps it in its data
	// directory).
	SigningKey ed25519.PrivateKey
	// BaseURL is the server's URL as webhook receivers reach it (e.g.
	// https://tether.example.com): the callback URLs sent to them, with a
	// token, and the JWKS URL are built from it, never from a request's
	// Host header (which the requester chooses). Webhook subscriptions are
	// refused without it. Defaults to none.
	BaseURL string
	// AllowLoopback accepts webhook URLs to this machine (localhost,
	// 127.x.x.x, ::1) and delivers to loopback addresses. Off by default:
	// such a webhook is a request into the server's own machine on behalf
	// of whoever made the subscription. For development and tests.
	AllowLoopback bool
	// DeliveryTimeout bounds one webhook request. Defaults to 10s.
	DeliveryTimeout time.Duration
	// Client delivers webhooks. Defaults to a client whose dialer refuses
	// every address that is not public unicast (loopback too, unless
	// AllowLoopback), checked as dialed. A Client given here does its own
	// checks.
	Client *http.Client
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Manager keeps subscriptions: it links them to the streams they follow,
// wakes them when those streams have data past what they acknowledged (a
// signed webhook, or an event in a wake stream that workers claim from),
// and holds the leases of the wakes. Create one with New, Start it, and
// pass Notify as the streams.Service's OnAppend and Deleted as its
// OnDelete.
type Manager struct {
	svc  *streams.Service
	st   store.Store
	keys *keys
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	subs map[string]*sub

	pmu     sync.Mutex
	pending map[string]bool // stream paths appended to, not yet looked at
	gone    map[string]bool // stream paths deleted, not yet forgotten
	kick    chan struct{}

	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	bg      sync.WaitGroup
	started bool
}

// sub is a subscription: its record (stored) and its current wake (in
// memory only: a restart drops wakes and leases, and wakes again whatever
// is pending, with a new generation).
type sub struct {
	rec record

	wakeID   string
	snapshot map[string]string // path → tail when the wake was made
	token    string
	holder   string
	lease    *time.Timer
	retries  int
	retry    *time.Timer
	status   string
}

// record is what is stored of a subscription.
type record struct {
	ID          string           `json:"id"`
	Type        string           `json:"type"`
	Pattern     string           `json:"pattern,omitempty"`
	WebhookURL  string           `json:"webhook_url,omitempty"`
	WakeStream  string           `json:"wake_stream,omitempty"`
	LeaseTTLMS  int64            `json:"lease_ttl_ms"`
	Description *string          `json:"description,omitempty"`
	CreatedAt   tether.Time      `json:"created_at"`
	ConfigHash  string           `json:"config_hash"`
	Generation  int64            `json:"generation"`
	Links       map[string]*link `json:"links"`
}

// link is a stream a subscription follows.
type link struct {
	Explicit bool   `json:"explicit,omitempty"`
	Glob     bool   `json:"glob,omitempty"`
	Acked    string `json:"acked"`
}

// Subscription types.
const (
	TypeWebhook  = "webhook"
	TypePullWake = "pull-wake"
)

// New returns a manager over the streams of svc, storing subscriptions in
// st.
func New(svc *streams.Service, st store.Store, opts Options) *Manager {
	if opts.SigningKey == nil {
		opts.SigningKey = NewSigningKey()
	}
	if opts.DeliveryTimeout <= 0 {
		opts.DeliveryTimeout = 10 * time.Second
	}
	if opts.Client == nil {
		opts.Client = webhookClient(opts.DeliveryTimeout, opts.AllowLoopback)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Manager{svc: svc, st: st, keys: newKeys(opts.SigningKey), opts: opts, log: opts.Logger,
		subs: make(map[string]*sub), pending: make(map[string]bool), gone: make(map[string]bool), kick: make(chan struct{}, 1)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Start loads the subscriptions and wakes those with pending data.
func (m *Manager) Start(ctx context.Context) error {
	q := store.ThreadQuery{Namespace: Namespace, Limit: 500}
	for {
		page, err := m.st.Threads(ctx, q)
		if err != nil {
			return err
		}
		for _, t := range page.Threads {
			var rec record
			if err := json.Unmarshal(t.Metadata, &rec); err != nil {
				m.log.Warn("subscription does not decode", "row", t.ID, "err", err)
				continue
			}
			if rec.Links == nil {
				rec.Links = make(map[string]*link)
			}
			m.subs[rec.ID] = &sub{rec: rec, status: "active"}
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	m.mu.Lock()
	for _, s := range m.subs {
		m.triggerNext(s)
	}
	m.started = true
	m.mu.Unlock()
	m.bg.Add(1)
	go m.loop()
	return nil
}

// Close stops deliveries and timers. Nothing starts a wake or a delivery
// once it has begun (closing); a delivery in flight is waited for.
func (m *Manager) Close() error {
	m.cancel()
	m.mu.Lock()
	for _, s := range m.subs {
		stopTimer(&s.lease)
		stopTimer(&s.retry)
	}
	m.mu.Unlock()
	m.bg.Wait()
	return nil
}

// Notify tells the manager that a stream was appended to. It never blocks
// (it is the streams.Service's OnAppend): the manager looks at the stream
// on its own goroutine.
func (m *Manager) Notify(path string) {
	m.pmu.Lock()
	m.pending[path] = true
	m.pmu.Unlock()
	m.poke()
}

// Deleted tells the manager that a stream was deleted (or expired): the
// subscriptions stop following it, as the protocol's reference server
// does, so that what they acknowledged of it is not taken for a position
// of a stream created again at the path (which a pattern follows from its
// start). It never blocks (it is the streams.Service's OnDelete).
func (m *Manager) Deleted(path string) {
	m.pmu.Lock()
	m.gone[path] = true
	m.pmu.Unlock()
	m.poke()
}

func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Manager) loop() {
	defer m.bg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.kick:
		}
		m.pmu.Lock()
		paths, gone := m.pending, m.gone
		m.pending, m.gone = make(map[string]bool), make(map[string]bool)
		m.pmu.Unlock()
		// Deletions first: an append taken with them was to the stream
		// created again, or to the deleted one (then appended finds
		// nothing to follow).
		for p := range gone {
			m.deleted(p)
		}
		for p := range paths {
			m.appended(p)
		}
	}
}

// appended links the stream at path to the subscriptions whose pattern
// matches it and wakes those that follow it.
func (m *Manager) appended(path string) {
	if path == streams.ReservedPrefix || strings.HasPrefix(path, streams.ReservedPrefix+"/") {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tailOf(path); !ok {
		return // deleted since: nothing to follow
	}
	for _, s := range m.subs {
		l := s.rec.Links[path]
		if s.rec.Pattern != "" && Match(s.rec.Pattern, path) && (l == nil || !l.Glob) {
			if l == nil {
				// Everything in a stream that appears after the
				// subscription is news to it.
				l = &link{Acked: streams.OffsetStart}
				s.rec.Links[path] = l
			}
			l.Glob = true
			m.save(s)
		}
		if l != nil && s.wakeID == "" && s.holder == "" && m.hasPending(s) {
			m.wake(s)
		}
	}
}

// deleted stops every subscription following the stream at path.
func (m *Manager) deleted(path string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.subs {
		if s.rec.Links[path] != nil {
			delete(s.rec.Links, path)
			m.save(s)
		}
	}
}

// tail returns the tail of a stream (the zero offset if it is gone).
func (m *Manager) tail(path string) string {
	t, _ := m.tailOf(path)
	return t
}

// tailOf returns the tail of a stream, and whether it exists (else the
// zero offset). A stream that does not exist (or was deleted while forks
// read it) has nothing pending, whatever was acknowledged of it. One the
// store could not tell about now is taken to exist, at the zero offset:
// a failure must not drop the wake of an append.
func (m *Manager) tailOf(path string) (string, bool) {
	in, err := m.svc.Head(m.ctx, path)
	if err != nil {
		c := streams.CodeOf(err)
		return streams.ZeroOffset, c != streams.CodeNotFound && c != streams.CodeGone && c != streams.CodeBadRequest
	}
	return in.Tail, true
}

// StreamInfo is a followed stream as a wake and a subscription show it.
type StreamInfo struct {
	Path        string `json:"path"`
	LinkType    string `json:"link_type"`
	AckedOffset string `json:"acked_offset"`
	TailOffset  string `json:"tail_offset"`
	HasPending  bool   `json:"has_pending"`
}

// infos returns the streams of s, by path. m.mu is held.
func (m *Manager) infos(s *sub) []StreamInfo {
	paths := make([]string, 0, len(s.rec.Links))
	for p := range s.rec.Links {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]StreamInfo, len(paths))
	for i, p := range paths {
		l := s.rec.Links[p]
		lt := "glob"
		if l.Explicit {
			lt = "explicit"
		}
		tail, ok := m.tailOf(p)
		out[i] = StreamInfo{Path: p, LinkType: lt, AckedOffset: l.Acked, TailOffset: tail, HasPending: ok && tail > l.Acked}
	}
	return out
}

func (m *Manager) hasPending(s *sub) bool {
	for p, l := range s.rec.Links {
		if t, ok := m.tailOf(p); ok && t > l.Acked {
			return true
		}
	}
	return false
}

// wake starts a wake of s: a new generation and a snapshot of the tails,
// then a webhook notification (whose lease starts when the receiver takes
// it) or an event in the wake stream. m.mu is held.
func (m *Manager) wake(s *sub) {
	if m.closing() {
		return
	}
	s.rec.Generation++
	m.save(s)
	s.wakeID = newWakeID()
	s.snapshot = make(map[string]string)
	var first string
	for _, in := range m.infos(s) {
		s.snapshot[in.Path] = in.TailOffset
		if first == "" && in.HasPending {
			first = in.Path
		}
	}
	if s.rec.Type == TypeWebhook {
		// The lease starts once the receiver took the notification
		// (deliver): a wake whose delivery is in flight or failing is
		// delivered again with backoff, one request at a time, rather
		// than replaced by a new wake, and a new request, every lease.
		m.deliver(s)
		return
	}
	ev, _ := json.Marshal(map[string]any{"type": "wake", "subscription_id": s.rec.ID, "stream": first,
		"generation": s.rec.Generation, "ts": m.opts.Now().UnixMilli()})
	_, err := m.svc.Append(m.ctx, streams.AppendRequest{Path: s.rec.WakeStream, ContentType: "application/json", Body: ev})
	if err != nil {
		m.log.Warn("write a wake event", "subscription", s.rec.ID, "wake_stream", s.rec.WakeStream, "err", err)
	}
}

// triggerNext wakes s if it has pending data and no wake. m.mu is held.
func (m *Manager) triggerNext(s *sub) bool {
	if s.wakeID != "" || s.holder != "" || !m.hasPending(s) {
		return false
	}
	m.wake(s)
	return true
}

// endWake drops s's current wake and lease. m.mu is held.
func (m *Manager) endWake(s *sub) {
	stopTimer(&s.lease)
	s.wakeID, s.snapshot, s.token, s.holder = "", nil, "", ""
}

// extendLease (re)starts the lease of s's wake: when it runs out, the wake
// ends and a new one starts if there is still pending data. m.mu is held.
func (m *Manager) extendLease(s *sub) {
	stopTimer(&s.lease)
	wid := s.wakeID
	s.lease = time.AfterFunc(time.Duration(s.rec.LeaseTTLMS)*time.Millisecond, func() {
		defer timerDone()
		timerFired()
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closing() || m.subs[s.rec.ID] != s || s.wakeID != wid {
			return
		}
		m.endWake(s)
		m.triggerNext(s)
	})
}

// timerFired and timerDone are called as a lease or retry timer's
// function starts and returns: a test holds a timer there to run it as
// Close runs.
var timerFired, timerDone = func() {}, func() {}

// closing reports whether Close has begun. m.mu is held: Close ends the
// context before it takes m.mu to stop the timers, so whatever takes m.mu
// after that sees it, and whatever took it before has added to bg before
// Close waits on it. A timer whose function had started (Stop could not
// stop it) and a request in flight then start nothing: no delivery, no
// wake, no write to a store being closed.
func (m *Manager) closing() bool { return m.ctx.Err() != nil }

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// actionURL returns the URL of one of s's actions.
func (m *Manager) actionURL(s *sub, action string) string {
	return m.baseURL() + "/v1/stream/__ds/subscriptions/" + url.PathEscape(s.rec.ID) + "/" + action
}

// jwksURL returns the URL of the signing keys: relative (to the API the
// subscription is read from) without a BaseURL.
func (m *Manager) jwksURL() string { return m.baseURL() + "/v1/stream/__ds/jwks.json" }

func (m *Manager) baseURL() string { return strings.TrimSuffix(m.opts.BaseURL, "/") }

// JWKS returns the public keys that verify webhook signatures.
func (m *Manager) JWKS() JWKS { return m.keys.jwks() }

// save stores s's record. m.mu is held. A failed write is logged: the
// record in memory stays authoritative until the next write.
func (m *Manager) save(s *sub) {
	if err := m.put(s, false); err != nil {
		m.log.Warn("store a subscription", "subscription", s.rec.ID, "err", err)
	}
}

func (m *Manager) put(s *sub, create bool) error {
	meta, err := json.Marshal(&s.rec)
	if err != nil {
		return err
	}
	now := tether.At(m.opts.Now())
	row := &tether.Thread{ID: Namespace + ":" + s.rec.ID, Status: tether.ThreadIdle, Metadata: meta,
		CreatedAt: s.rec.CreatedAt, UpdatedAt: now}
	_, err = m.st.Commit(context.WithoutCancel(m.ctx), &store.Batch{ThreadID: row.ID, Create: create, Thread: row})
	return err
}

// configHash identifies a subscription's configuration, for idempotent
// creates.
func configHash(in *CreateRequest) string {
	streams := slices.Clone(in.Streams)
	slices.Sort(streams)
	streams = slices.Compact(streams)
	b, _ := json.Marshal([]any{in.Type, in.Pattern, streams, in.WebhookURL, in.WakeStream, in.LeaseTTL.Milliseconds(), in.Description})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
