package wake_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a streams service and a manager over a real store in a directory.
type env struct {
	t    *testing.T
	dir  string
	opts wake.Options
	key  ed25519.PrivateKey
	st   *sqlitestore.Store
	hub  *hub.Hub
	svc  *streams.Service
	m    *wake.Manager
}

// newEnv is an env whose manager delivers to loopback (the receivers of
// the tests listen there).
func newEnv(t *testing.T) *env {
	return newEnvWith(t, wake.Options{BaseURL: "http://tether.test", AllowLoopback: true})
}

func newEnvWith(t *testing.T, opts wake.Options) *env {
	e := &env{t: t, dir: t.TempDir(), opts: opts, key: wake.NewSigningKey()}
	e.opts.SigningKey = e.key
	e.open()
	return e
}

func (e *env) open() {
	st, err := sqlitestore.Open(filepath.Join(e.dir, "tether.db"), sqlitestore.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	h := hub.New(st.ReadPage, hub.Options{})
	st.SetNotify(func(c *store.Committed) { h.Publish(c.ThreadID, c.Before, c.Records) })
	var m *wake.Manager
	svc := streams.New(st, h, streams.Options{OnAppend: func(p string) { m.Notify(p) },
		OnDelete: func(p string) { m.Deleted(p) }})
	m = wake.New(svc, st, e.opts)
	if err := svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.st, e.hub, e.svc, e.m = st, h, svc, m
	e.t.Cleanup(e.close)
}

func (e *env) close() {
	if e.m == nil {
		return
	}
	e.m.Close()
	e.svc.Close()
	e.hub.Close()
	e.st.Close()
	e.m = nil
}

func (e *env) reopen() {
	e.close()
	e.open()
}

func (e *env) write(path, body string) string {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.svc.Head(ctx, path); err != nil {
		res, err := e.svc.Create(ctx, streams.CreateRequest{Path: path, ContentType: "application/json", Body: []byte(body)})
		if err != nil {
			e.t.Fatal(err)
		}
		return res.Info.Tail
	}
	res, err := e.svc.Append(ctx, streams.AppendRequest{Path: path, ContentType: "application/json", Body: []byte(body)})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Tail
}

// receiver is a webhook endpoint that records notifications.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	got   []received
	reply string
	ready chan struct{}
}

type received struct {
	body []byte
	sig  string
}

func newReceiver(t *testing.T, reply string) *receiver {
	r := &receiver{reply: reply, ready: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{b, req.Header.Get("Webhook-Signature")})
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, r.reply)
		r.ready <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

type notification struct {
	SubscriptionID string            `json:"subscription_id"`
	WakeID         string            `json:"wake_id"`
	Generation     int64             `json:"generation"`
	Streams        []wake.StreamInfo `json:"streams"`
	CallbackURL    string            `json:"callback_url"`
	CallbackToken  string            `json:"callback_token"`
}

func (r *receiver) next(t *testing.T) (notification, received) {
	t.Helper()
	select {
	case <-r.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook request")
	}
	r.mu.Lock()
	got := r.got[len(r.got)-1]
	r.mu.Unlock()
	var n notification
	if err := json.Unmarshal(got.body, &n); err != nil {
		t.Fatal(err)
	}
	return n, got
}

var sigRE = regexp.MustCompile(`^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$`)

// verify checks a Webhook-Signature against the manager's JWKS.
func verify(t *testing.T, m *wake.Manager, got received) {
	t.Helper()
	p := sigRE.FindStringSubmatch(got.sig)
	if p == nil {
		t.Fatalf("signature header %q", got.sig)
	}
	var key *wake.JWK
	for _, k := range m.JWKS().Keys {
		if k.Kid == p[2] {
			key = &k
		}
	}
	if key == nil || key.Kty != "OKP" || key.Crv != "Ed25519" || key.Alg != "EdDSA" {
		t.Fatalf("no key %s in the JWKS", p[2])
	}
	pub, _ := base64.RawURLEncoding.DecodeString(key.X)
	sig, _ := base64.RawURLEncoding.DecodeString(p[3])
	if ts, _ := strconv.ParseInt(p[1], 10, 64); time.Since(time.Unix(ts, 0)) > time.Minute {
		t.Fatal("old timestamp")
	}
	if !ed25519.Verify(pub, []byte(p[1]+"."+string(got.body)), sig) {
		t.Fatal("the signature does not verify")
	}
}

func code(err error) string {
	if we, ok := err.(*wake.Error); ok {
		return we.Code
	}
	return ""
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		want      bool
	}{
		{"events/*", "events/a", true},
		{"events/*", "events/a/b", false},
		{"events/*", "events", false},
		{"events/**", "events/a/b", true},
		{"events/**", "events", true},
		{"**/x", "a/b/x", true},
		{"/events/a/", "events/a", true},
		{"a/%2A", "a/*", true},
		{"a/b", "a/c", false},
	} {
		if got := wake.Match(c.pat, c.path); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.pat, c.path, got)
		}
	}
}

func TestWebhook(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, `{}`)
	e.write("events/old", `{"n":0}`) // before the subscription: not pending
	req := wake.CreateRequest{Type: wake.TypeWebhook, Pattern: "events/*", WebhookURL: r.URL + "/hook", LeaseTTL: 5 * time.Second}
	sub, created, err := e.m.Create("s1", req)
	if err != nil || !created || sub.Webhook.Signing.Alg != "ed25519" || sub.Webhook.Signing.JWKSURL != "http://tether.test/v1/stream/__ds/jwks.json" {
		t.Fatalf("create: %+v, %v", sub, err)
	}
	if _, created, err := e.m.Create("s1", req); err != nil || created {
		t.Fatalf("the same create again: %v, %v", created, err)
	}
	other := req
	other.LeaseTTL = 2 * time.Second
	if _, _, err := e.m.Create("s1", other); code(err) != wake.CodeSubscriptionExists {
		t.Fatalf("another configuration: %v", err)
	}
	for _, bad := range []string{"http://10.0.0.1/hook", "https://192.168.1.2/x", "ftp://x/y", "https://[2606:4700::1111]/x", "http://example.com/x", "/relative"} {
		req := req
		req.WebhookURL = bad
		if _, _, err := e.m.Create("bad-"+bad, req); code(err) != wake.CodeWebhookURLRejected {
			t.Errorf("%s: %v", bad, err)
		}
	}

	tail := e.write("events/a", `{"n":1}`)
	n, got := r.next(t)
	verify(t, e.m, got)
	if n.SubscriptionID != "s1" || n.CallbackURL != "http://tether.test/v1/stream/__ds/subscriptions/s1/callback" || n.Generation != 1 {
		t.Fatalf("notification: %+v", n)
	}
	var a wake.StreamInfo
	for _, s := range n.Streams {
		if s.Path == "events/a" {
			a = s
		}
		if s.Path == "events/old" && s.HasPending {
			t.Fatal("a stream's data from before the subscription is pending")
		}
	}
	if a.TailOffset != tail || !a.HasPending {
		t.Fatalf("stream in the notification: %+v", a)
	}

	ack := wake.AckRequest{WakeID: n.WakeID, Generation: n.Generation, Acks: []wake.Ack{{Stream: "events/a", Offset: tail}}, Done: true}
	if _, err := e.m.Callback("s1", "not a token", ack); code(err) != wake.CodeTokenInvalid {
		t.Fatalf("a bad token: %v", err)
	}
	bad := ack
	bad.Acks = []wake.Ack{{Stream: "events/a", Offset: "9999999999_9999999999999999"}}
	if _, err := e.m.Callback("s1", n.CallbackToken, bad); code(err) != wake.CodeInvalidOffset {
		t.Fatalf("an ack past the tail: %v", err)
	}
	// Strings that sort between the start and the tail but are no offset
	// are refused too: kept, they would stand as the acked offset.
	for _, junk := range []string{"1", "0", "00000000001", "0000000001_x", "0000000001_0000000000000001 "} {
		bad.Acks = []wake.Ack{{Stream: "events/a", Offset: junk}}
		if _, err := e.m.Callback("s1", n.CallbackToken, bad); code(err) != wake.CodeInvalidOffset {
			t.Fatalf("an ack at %q: %v", junk, err)
		}
	}
	res, err := e.m.Callback("s1", n.CallbackToken, ack)
	if err != nil || !res.OK || res.NextWake {
		t.Fatalf("callback: %+v, %v", res, err)
	}
	if _, err := e.m.Callback("s1", n.CallbackToken, ack); code(err) != wake.CodeFenced {
		t.Fatalf("the same callback again: %v", err)
	}
	if s, _ := e.m.Get("s1"); s.Streams[0].AckedOffset != tail {
		t.Fatalf("acked offsets: %+v", s.Streams)
	}

	// Acks and the generation survive a restart; the old token is fenced.
	e.reopen()
	if s, err := e.m.Get("s1"); err != nil || s.Streams[0].AckedOffset != tail {
		t.Fatalf("after a restart: %+v, %v", s, err)
	}
	e.write("events/a", `{"n":2}`)
	n2, _ := r.next(t)
	if n2.Generation != 2 {
		t.Fatalf("generation after a restart: %d", n2.Generation)
	}
	if _, err := e.m.Callback("s1", n.CallbackToken, ack); code(err) != wake.CodeFenced {
		t.Fatalf("an old wake's token after a restart: %v", err)
	}
	if err := e.m.Delete("s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Get("s1"); code(err) != wake.CodeSubscriptionNotFound {
		t.Fatalf("after delete: %v", err)
	}
}

func TestWebhookDone(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, `{"done":true}`)
	if _, _, err := e.m.Create("s", wake.CreateRequest{Type: wake.TypeWebhook, Streams: []string{"x"}, WebhookURL: r.URL, LeaseTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	tail := e.write("x", `[1,2]`)
	r.next(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _ := e.m.Get("s")
		if s.Streams[0].AckedOffset == tail && s.Streams[0].LinkType == "explicit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not acknowledged: %+v", s.Streams)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPullWake(t *testing.T) {
	e := newEnv(t)
	e.write("wake/pool", `[]`)
	if _, _, err := e.m.Create("p", wake.CreateRequest{Type: wake.TypePullWake, Pattern: "events/*", WakeStream: "wake/pool", LeaseTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Claim("p", "w1"); code(err) != wake.CodeNoPendingWork {
		t.Fatalf("claim with nothing pending: %v", err)
	}
	tail := e.write("events/a", `{"n":1}`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, _ := e.svc.Read(context.Background(), "wake/pool", "-1")
		if len(res.Items) > 0 {
			var ev map[string]any
			json.Unmarshal(res.Items[0], &ev)
			if ev["type"] != "wake" || ev["subscription_id"] != "p" || ev["stream"] != "events/a" {
				t.Fatalf("wake event %s", res.Items[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no wake event")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := e.m.Claim("p", "w1")
	if err != nil || c.Token == "" || c.Streams[0].TailOffset != tail {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	_, err = e.m.Claim("p", "w2")
	if we, ok := err.(*wake.Error); !ok || we.Code != wake.CodeAlreadyClaimed || we.CurrentHolder != "w1" {
		t.Fatalf("second claim: %v", err)
	}
	res, err := e.m.Ack("p", c.Token, wake.AckRequest{WakeID: c.WakeID, Generation: c.Generation,
		Acks: []wake.Ack{{Path: "events/a", Offset: tail}}, Done: true})
	if err != nil || !res.OK || res.NextWake {
		t.Fatalf("ack: %+v, %v", res, err)
	}
	// A lease that runs out gives the wake to the next worker.
	e.write("events/a", `{"n":2}`)
	c2, err := e.m.Claim("p", "w1")
	if err != nil || c2.Generation <= c.Generation {
		t.Fatalf("claim: %+v, %v", c2, err)
	}
	time.Sleep(1500 * time.Millisecond)
	c3, err := e.m.Claim("p", "w2")
	if err != nil || c3.Generation <= c2.Generation {
		t.Fatalf("claim after the lease ran out: %+v, %v", c3, err)
	}
	if err := e.m.Release("p", c2.Token, wake.AckRequest{WakeID: c2.WakeID, Generation: c2.Generation}); code(err) != wake.CodeFenced {
		t.Fatalf("release with the lost lease's token: %v", err)
	}
	if err := e.m.Release("p", c3.Token, wake.AckRequest{WakeID: c3.WakeID, Generation: c3.Generation}); err != nil {
		t.Fatal(err)
	}
}

// TestWebhookLoopbackNeedsTheOperator: a webhook to the server's own
// machine (loopback, by address or name) is a blind request into it, so
// subscriptions may name one only if the operator allowed it.
func TestWebhookLoopbackNeedsTheOperator(t *testing.T) {
	e := newEnvWith(t, wake.Options{BaseURL: "https://tether.test"})
	for _, u := range []string{"http://127.0.0.1:9/hook", "http://localhost:2375/containers/json", "http://127.1.2.3/x",
		"http://LOCALHOST./x", "https://localhost./x", "https://127.0.0.1/x", "http://[::1]:9/x", "http://0.0.0.0:9/x",
		"https://[::ffff:127.0.0.1]/x", "https://100.100.100.200/latest/meta-data", "https://169.254.169.254/x", "https://[fd00:ec2::254]/x"} {
		_, _, err := e.m.Create("s-"+u, wake.CreateRequest{Type: wake.TypeWebhook, Pattern: "events/*", WebhookURL: u, LeaseTTL: 5 * time.Second})
		if code(err) != wake.CodeWebhookURLRejected {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, _, err := e.m.Create("public", wake.CreateRequest{Type: wake.TypeWebhook, Pattern: "events/*",
		WebhookURL: "https://hooks.example.com/x", LeaseTTL: 5 * time.Second}); err != nil {
		t.Fatalf("a public webhook: %v", err)
	}
	// Without a public URL there is no callback URL to send: refused.
	e2 := newEnvWith(t, wake.Options{})
	if _, _, err := e2.m.Create("public", wake.CreateRequest{Type: wake.TypeWebhook, Pattern: "events/*",
		WebhookURL: "https://hooks.example.com/x", LeaseTTL: 5 * time.Second}); code(err) != wake.CodeWebhookURLRejected {
		t.Fatalf("a webhook without a public URL: %v", err)
	}
}
