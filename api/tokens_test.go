package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// The HMAC secret and audience of a token env.
var (
	tkSecret   = testutil.JWTSecret
	tkAudience = "tether-test"
)

// clock is a test clock: real time moved by an offset.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// mint signs claims with HS256 and key (tkSecret if nil). exp, aud and
// the time fields are the caller's.
var mint = testutil.Mint

// userClaims are the claims of a user's token valid for an hour by c,
// with Tether's claim tc if not nil.
func userClaims(c *clock, sub string, tc map[string]any) jwt.MapClaims {
	m := jwt.MapClaims{"sub": sub, "aud": tkAudience, "exp": c.now().Add(time.Hour).Unix(), "iat": c.now().Unix()}
	if tc != nil {
		m["tether"] = tc
	}
	return m
}

// newTokenEnv is newAuthEnv (static keys for every role) that also takes
// HS256 tokens signed with tkSecret for tkAudience, on clock c.
func newTokenEnv(t *testing.T, c *clock, opts api.Options) *env {
	t.Helper()
	opts.Tokens.Secret, opts.Tokens.Audience, opts.Tokens.Now = tkSecret, tkAudience, c.now
	return newAuthEnv(t, opts)
}

const aliceSecret = "alice's secret question"

// tokenFixture is user A's thread (tA) with a finished demo run and a run
// of agent ext (rA) held by worker X, and user A's stream alice/s1.
type tokenFixture struct {
	alice, bob, workerX, admin string
	runID, lease               string
}

func (v *env) tokenFixture(c *clock) tokenFixture {
	v.t.Helper()
	f := tokenFixture{
		alice:   mint(v.t, nil, userClaims(c, "alice", map[string]any{"threads": []string{"alice/*"}})),
		bob:     mint(v.t, nil, userClaims(c, "bob", map[string]any{"threads": []string{"bob/*"}})),
		workerX: mint(v.t, nil, userClaims(c, "worker-x", map[string]any{"role": "worker", "agents": []string{"ext"}})),
		admin:   mint(v.t, nil, userClaims(c, "root", map[string]any{"role": "admin"})),
	}
	a := bearer(f.alice)
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`, a...)
	var demo tether.Run
	v.mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"demo","input":{"messages":[{"role":"user","content":"`+aliceSecret+`"}]},"metadata":{"demo":{"tokens":3,"delay_ms":0}}}`, a...).json(&demo)
	waitStatus(v, demo.ID, tether.RunDone, a)
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"wx","agents":["ext"],"wait_ms":0}`, bearer(f.workerX)...)
	v.mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"`+aliceSecret+` again"}]}}`, a...)
	var cl extClaim
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"wx","agents":["ext"],"wait_ms":5000}`, bearer(f.workerX)...).json(&cl)
	f.runID, f.lease = cl.Run.ID, cl.Lease.Token
	v.mustDo(201, "PUT", "/v1/stream/alice/s1", `{"a":"`+aliceSecret+`"}`, append(a, "Content-Type", "application/json")...)
	v.mustDo(201, "PUT", "/v1/stream/__ds/subscriptions/sub1", `{"type":"pull-wake","pattern":"x/**","wake_stream":"wakes"}`, bearer(f.admin)...)
	return f
}

func waitStatus(v *env, runID string, status tether.RunStatus, hdr []string) {
	v.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var body struct{ Run tether.Run }
		v.mustDo(200, "GET", "/v1/runs/"+runID, nil, hdr...).json(&body)
		if body.Run.Status == status {
			return
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("run %s: %s, want %s", runID, body.Run.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRouteTokens calls every route of §9's table with every kind of
// token on user A's thread and run: none, expired, wrong signature, wrong
// audience, user A, user B, a worker scoped to agent ext, an admin. User B
// can neither read, follow, list, cancel nor answer user A's threads, nor
// delete them, through any surface: every route that names one answers
// not_found (as for a thread that does not exist) and nothing of it; user
// A gets through. The rows come from the document, so a new route is
// tested as soon as it has its row (TestRouteTableMatchesDoc makes sure
// it has one).
func TestRouteTokens(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{})
	f := v.tokenFixture(&c)
	rows, _ := docRoutes(t)

	expired := userClaims(&c, "alice", nil)
	expired["exp"] = c.now().Add(-time.Hour).Unix()
	wrongAud := userClaims(&c, "alice", nil)
	wrongAud["aud"] = "another-app"
	type caller struct {
		name, token string
		column      int // of the role table; -1 for a user's token
		want        string
	}
	callers := []caller{
		{"no token", "", 3, "unauthorized"},
		{"expired", mint(t, nil, expired), 3, "token_expired"},
		{"wrong signature", mint(t, []byte("another-secret-of-at-least-32-bytes!"), userClaims(&c, "alice", nil)), 3, "unauthorized"},
		{"wrong audience", mint(t, nil, wrongAud), 3, "unauthorized"},
		{"user A", f.alice, -1, "A"},
		{"user B", f.bob, -1, "B"},
		{"worker X", f.workerX, 2, ""},
		{"admin", f.admin, 0, ""},
	}

	victims := 0
	victim := func(kind string) string {
		victims++
		id := fmt.Sprintf("victim%d", victims)
		switch kind {
		case "thread":
			v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": id}, bearer(f.alice)...)
		case "stream":
			id = "alice/" + id
			v.mustDo(201, "PUT", "/v1/stream/"+id, `{"a":1}`, append(bearer(f.alice), "Content-Type", "application/json")...)
		case "sub":
			v.mustDo(201, "PUT", "/v1/stream/__ds/subscriptions/"+id, `{"type":"pull-wake","pattern":"x/**","wake_stream":"wakes"}`, bearer(f.admin)...)
		}
		return id
	}
	for _, r := range rows {
		statuses := map[string]int{}
		for _, cl := range callers {
			path, kind := r.path, ""
			switch {
			case r.method == "DELETE" && path == "/v1/threads/{tid}":
				kind = "thread"
			case r.method == "DELETE" && path == "/v1/stream/{path}":
				kind = "stream"
			case r.method == "DELETE" && path == "/v1/stream/__ds/subscriptions/{id}":
				kind = "sub"
			}
			var gone string // what a DELETE may remove
			if kind != "" {
				gone = victim(kind)
				path = strings.Replace(strings.Replace(strings.Replace(path, "{tid}", gone, 1), "{path}", gone, 1), "{id}", gone, 1)
			}
			path = strings.NewReplacer("{tid}", "tA", "{rid}", f.runID, "{path}", "alice/s1", "{id}", "sub1",
				"{name}", "declared", "{agent}", "ext", "{chat}", "tA").Replace(path)
			res := v.callAs(r.method, path, cl.token)
			status := res.status
			if path == "/v1/ws" && status == http.StatusUpgradeRequired {
				status = v.wsSubscribeAs(cl.token, f.runID, "tA")
			}
			statuses[cl.name] = status
			refused := status == 401 || status == 403
			open := r.cells[3] == "yes"
			switch {
			case open:
				if refused {
					t.Errorf("%s as %s: %d, want it let through", r, cl.name, status)
				}
			case cl.column == 3 && r.cells[3] == "wake token":
				if status != 401 {
					t.Errorf("%s as %s: %d, want the wake's own 401", r, cl.name, status)
				}
			case cl.column == 3:
				if status != 401 || r.method != "HEAD" && res.code() != cl.want {
					t.Errorf("%s as %s: %d %s, want 401 %s", r, cl.name, status, res.body, cl.want)
				}
			case cl.column >= 0:
				cell := r.cells[cl.column]
				switch {
				case cell == "yes" || cell == "its runs":
					if refused {
						t.Errorf("%s as %s: %d %s, want it let through", r, cl.name, status, res.body)
					}
				case cell == "no":
					if status != 403 {
						t.Errorf("%s as %s: %d, want 403", r, cl.name, status)
					}
				case cell == "wake token":
					if status != 401 {
						t.Errorf("%s as %s: %d, want the wake's own 401", r, cl.name, status)
					}
				}
			case r.cells[1] == "no": // a user's token is a client's
				if status != 403 {
					t.Errorf("%s as %s: %d, want 403", r, cl.name, status)
				}
			case r.cells[1] == "wake token":
				if status != 401 {
					t.Errorf("%s as %s: %d, want the wake's own 401", r, cl.name, status)
				}
			default:
				rule := r.userRule()
				if rule.other == 404 && rule.acts["stream"] && r.method != "GET" && r.method != "HEAD" {
					// Another's stream is not_found to reads; writes to
					// a path the token's patterns do not match are
					// forbidden, whether or not a stream is there.
					rule.other = 403
				}
				if cl.want == "A" && !rule.ownerOK {
					if status != rule.other {
						t.Errorf("%s as user A (%s): %d %s, want %d", r, r.user, status, res.body, rule.other)
					}
					break
				}
				if cl.want == "A" {
					if !rule.ownerOK || refused || status == 404 {
						t.Errorf("%s as user A (%s): %d %s, want it let through", r, r.user, status, res.body)
					}
					break
				}
				if strings.Contains(string(res.body), aliceSecret) {
					t.Errorf("%s as user B: user A's data in the answer: %s", r, res.body)
				}
				switch {
				case r.user == "its threads (listed)":
					if status != 200 || strings.Contains(string(res.body), `"tA"`) {
						t.Errorf("%s as user B: %d %s, want 200 without tA", r, status, res.body)
					}
				case rule.other == 0:
					if refused {
						t.Errorf("%s as user B: %d, want it let through", r, status)
					}
				case status != rule.other:
					t.Errorf("%s as user B (%s): %d %s, want %d", r, r.user, status, res.body, rule.other)
				}
				if gone != "" && status == rule.other {
					// Still there for its owner.
					p := "/v1/threads/" + gone
					if kind == "stream" {
						p = "/v1/stream/" + gone + "?offset=-1"
					}
					if kind != "sub" {
						v.mustDo(200, "GET", p, nil, bearer(f.alice)...)
					}
				}
			}
		}
		t.Logf("%-62s %v", r, statuses)
	}
}

// callAs makes one request of the table with token: bodies that name user
// A's thread where a route takes one (AG-UI, the AI SDK's chat), JSON
// answers rather than streams, the answer read whole unless it is a
// stream.
func (v *env) callAs(method, path, token string) *resp {
	v.t.Helper()
	var body string
	switch {
	case path == "/v1/ag-ui/ext":
		body = `{"threadId":"tA","runId":"agui-1","state":{},"messages":[{"id":"agui-u1","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`
	case path == "/v1/ai-sdk/ext/chat":
		body = `{"id":"tA","trigger":"submit-message","messages":[{"id":"sdk-u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`
	default:
		body = routeBody(method, path, "ext")
		if body == `{}` && method == "PUT" && strings.HasPrefix(path, "/v1/stream/") {
			body = `{"b":2}`
		}
	}
	return v.send(method, path, token, body)
}

// wsSubscribeAs connects to the WebSocket with token and subscribes to the
// run, then to the thread: 200 if both are subscribed, the status of the
// first error's code otherwise (on the socket, a refusal is per
// subscription), the dial's if the upgrade is refused.
func (v *env) wsSubscribeAs(token, runID, threadID string) int {
	v.t.Helper()
	w, refused := v.wsAs(token)
	if w == nil {
		return refused
	}
	defer w.c.CloseNow()
	statuses := map[string]int{"forbidden": 403, "not_found": 404}
	for i, sub := range [][]string{{"run_id", runID}, {"thread_id", threadID}} {
		if i == 1 && v.wsWorker(token) {
			break // a worker may subscribe only to runs
		}
		w.subscribe(sub[0], sub[0], sub[1], "after", "now")
		switch m := w.read(); {
		case m.Op == "subscribed":
		case m.Op == "error" && statuses[m.Error.Code] != 0:
			if strings.Contains(m.raw, aliceSecret) {
				v.t.Errorf("refused subscription tells user A's data: %s", m.raw)
			}
			return statuses[m.Error.Code]
		default:
			v.t.Fatalf("subscribe %s: %s", sub[0], m.raw)
		}
	}
	return 200
}

// wsWorker reports whether a token is a worker's (static or signed).
func (v *env) wsWorker(token string) bool {
	if token == azWorker || token == azWorker2 {
		return true
	}
	p, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return false
	}
	tc, _ := p.Claims.(jwt.MapClaims)["tether"].(map[string]any)
	return tc != nil && tc["role"] == "worker"
}
