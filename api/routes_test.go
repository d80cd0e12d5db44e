package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
)

// docRoute is a row of the table "Who may call what" in docs/protocol.md
// §9: a route and, for admin, client, worker and no token, yes, no,
// "its runs" or "wake token"; and for a user's token (a signed client
// token), what it may do (see userRule).
type docRoute struct {
	method, path string
	cells        [4]string
	user         string
}

func (d docRoute) String() string { return d.method + " " + d.path }

// access is the row's rule in the words of the route table (api.RouteRule).
func (d docRoute) access() string {
	switch d.cells {
	case [4]string{"yes", "yes", "yes", "yes"}:
		return "open"
	case [4]string{"wake token", "wake token", "wake token", "wake token"}:
		return "wake"
	case [4]string{"yes", "yes", "no", "no"}:
		return "client"
	case [4]string{"yes", "no", "yes", "no"}:
		return "worker"
	case [4]string{"yes", "yes", "its runs", "no"}:
		return "run"
	case [4]string{"yes", "no", "no", "no"}:
		return "admin"
	}
	return fmt.Sprintf("no rule for %q", d.cells)
}

// userRule is what the "user token" cell of a row means: whether the
// owner of the thread (user A) and another user (user B) get through, and
// the acts of the route table (api.RouteRule.Act) that implement it.
type userRule struct {
	ownerOK bool // user A is let through
	// other is what user B gets: 0 if let through, else the status.
	other int
	acts  map[string]bool
}

func (d docRoute) userRule() userRule {
	set := func(acts ...string) map[string]bool {
		m := map[string]bool{}
		for _, a := range acts {
			m[a] = true
		}
		return m
	}
	base, paren, _ := strings.Cut(strings.TrimSuffix(d.user, ")"), " (")
	// The Durable Streams routes are one entry of the server's table,
	// which maps each path (allowStream).
	ds := strings.HasPrefix(d.path, "/v1/stream/") && !strings.Contains(d.path, "jwks") && d.cells[0] != "wake token"
	switch {
	case d.user == "yes":
		return userRule{ownerOK: true, acts: set("")}
	case d.user == "no" && ds:
		return userRule{other: 403, acts: set("stream")}
	case d.user == "no":
		return userRule{other: 403, acts: set("")}
	case d.user == "wake token":
		return userRule{other: 401, acts: set("")}
	case d.user == "create":
		return userRule{ownerOK: true, acts: set("create")}
	case d.user == "its streams":
		return userRule{ownerOK: true, other: 404, acts: set("stream")}
	case base == "its threads" && ds:
		return userRule{ownerOK: true, other: 404, acts: set("stream")}
	case base == "its threads":
		switch paren {
		case "":
			return userRule{ownerOK: true, other: 404, acts: set("read")}
		case "run", "cancel", "answer", "delete":
			return userRule{ownerOK: true, other: 404, acts: set(paren)}
		case "others as new":
			// Another's chat is a chat that does not exist yet (204, []).
			return userRule{ownerOK: true, acts: set("read")}
		case "cancel, others as new":
			// The AI SDK's stop: another's chat has no run to stop (204).
			return userRule{ownerOK: true, acts: set("cancel")}
		case "listed", "each subscribe", "body: run":
			// Checked by the handler (listing filter, each subscribe,
			// the thread of the body), with the same rule.
			return userRule{ownerOK: true, other: 404, acts: set("")}
		}
	}
	return userRule{acts: set("no rule for " + d.user)}
}

var (
	rowRoute  = regexp.MustCompile("^`([A-Z]+) (/[^`]*)`")
	mentioned = regexp.MustCompile("`(GET|HEAD|POST|PUT|DELETE|PATCH) (/[^`\\s?]*)")
)

// docRoutes parses the table of §9 and returns its rows, and every route
// the document names anywhere (`METHOD /path`).
func docRoutes(t *testing.T) (rows []docRoute, named []string) {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, table, ok := strings.Cut(doc, "### Who may call what")
	if !ok {
		t.Fatal(`docs/protocol.md has no "### Who may call what"`)
	}
	inTable := false
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		m := rowRoute.FindStringSubmatch(cells[0])
		if m == nil {
			continue // the header and its rule
		}
		if len(cells) != 6 {
			t.Fatalf("row %q: want 6 cells", line)
		}
		rows = append(rows, docRoute{method: m[1], path: m[2], cells: [4]string(cells[1:5]), user: cells[5]})
	}
	if len(rows) < 30 {
		t.Fatalf("found %d rows in the table of §9", len(rows))
	}
	for _, m := range mentioned.FindAllStringSubmatch(doc, -1) {
		named = append(named, m[1]+" "+m[2])
	}
	return rows, named
}

// TestRouteTableMatchesDoc: every route the document names has a row in
// §9's table; every row is served by an entry of the server's table with
// the same rule; every entry of the server's table serves a row. A route
// added to either without the other fails here.
func TestRouteTableMatchesDoc(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	rows, named := docRoutes(t)
	inTable := map[string]bool{}
	for _, r := range rows {
		if inTable[r.String()] {
			t.Errorf("%s: two rows", r)
		}
		inTable[r.String()] = true
	}
	for _, n := range named {
		if !inTable[n] {
			t.Errorf("docs/protocol.md names %s, which has no row in §9's table", n)
		}
	}

	mux := http.NewServeMux()
	rules, acts := map[string]string{}, map[string]string{}
	for _, rr := range api.RouteTable(v.srv) {
		rules[rr.Pattern], acts[rr.Pattern] = rr.Access, rr.Act
		mux.Handle(rr.Pattern, http.NotFoundHandler())
	}
	served := map[string]bool{}
	for _, r := range rows {
		req := httptestRequest(r.method, concrete(r.path, "x"))
		_, pattern := mux.Handler(req)
		served[pattern] = true
		if got, want := rules[pattern], r.access(); got != want {
			t.Errorf("%s: served by %q with rule %q; the document says %q", r, pattern, got, want)
		}
		if got := acts[pattern]; !r.userRule().acts[got] {
			t.Errorf("%s: served by %q, which checks a user's token for %q; the document says %q", r, pattern, got, r.user)
		}
	}
	for pattern := range rules {
		if !served[pattern] {
			t.Errorf("the server's route %q has no row in docs/protocol.md §9", pattern)
		}
	}
}

// TestRouteRoles calls every route of §9's table with every role on a
// server with keys, and checks that the roles the table refuses get 403
// (401 without a token) and the others get through to the route. A
// worker's "its runs" is tried with the worker that holds the run and
// with another.
func TestRouteRoles(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	rows, _ := docRoutes(t)
	held := v.workerRun("t1", azWorker)
	v.mustDo(201, "PUT", "/v1/stream/s1", `{"a":1}`, append(bearer(azClient), "Content-Type", "application/json")...)
	sub := `{"type":"pull-wake","pattern":"x/**","wake_stream":"wakes"}`
	v.mustDo(201, "PUT", "/v1/stream/__ds/subscriptions/sub1", sub, bearer(azClient)...)

	// DELETEs get a victim of their own each, so that the resources the
	// other rows use stay.
	victims := 0
	victim := func(kind string) string {
		victims++
		id := fmt.Sprintf("victim%d", victims)
		switch kind {
		case "thread":
			v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": id}, bearer(azClient)...)
		case "stream":
			v.mustDo(201, "PUT", "/v1/stream/"+id, `{"a":1}`, append(bearer(azClient), "Content-Type", "application/json")...)
		case "sub":
			v.mustDo(201, "PUT", "/v1/stream/__ds/subscriptions/"+id, sub, bearer(azClient)...)
		}
		return id
	}
	type caller struct {
		name, token string
		column      int
		owner       bool // holds the run
	}
	callers := []caller{
		{"admin", azAdmin, 0, false}, {"client", azClient, 1, false},
		{"worker holding the run", azWorker, 2, true}, {"another worker", azWorker2, 2, false},
		{"no token", "", 3, false},
	}
	for _, r := range rows {
		statuses := map[string]int{}
		for _, c := range callers {
			path := r.path
			switch {
			case r.method == "DELETE" && path == "/v1/threads/{tid}":
				path = "/v1/threads/" + victim("thread")
			case r.method == "DELETE" && path == "/v1/stream/{path}":
				path = "/v1/stream/" + victim("stream")
			case r.method == "DELETE" && path == "/v1/stream/__ds/subscriptions/{id}":
				path = "/v1/stream/__ds/subscriptions/" + victim("sub")
			}
			path = strings.NewReplacer("{tid}", "t1", "{rid}", held.Run.ID, "{path}", "s1", "{id}", "sub1", "{name}", "declared").Replace(path)
			status := v.callRoute(r.method, path, c.token)
			if path == "/v1/ws" && status == http.StatusUpgradeRequired {
				status = v.wsFollow(held.Run.ID, c.token)
			}
			statuses[c.name] = status
			cell := r.cells[c.column]
			refused := status == 401 || status == 403
			switch {
			case cell == "yes" || (cell == "its runs" && c.owner):
				if refused {
					t.Errorf("%s as %s: %d, want it let through", r, c.name, status)
				}
			case cell == "no" && c.token == "":
				if status != 401 {
					t.Errorf("%s without a token: %d, want 401", r, status)
				}
			case cell == "no" || cell == "its runs":
				if status != 403 {
					t.Errorf("%s as %s: %d, want 403", r, c.name, status)
				}
			case cell == "wake token":
				if status != 401 {
					t.Errorf("%s as %s (no wake token): %d, want the wake's own 401", r, c.name, status)
				}
			default:
				t.Errorf("%s: unknown cell %q", r, cell)
			}
		}
		t.Logf("%-62s %v", r, statuses)
	}
}

// callRoute makes one request as the table's rows need it (a small valid
// body, JSON answers rather than streams) and returns the status, without
// waiting for a stream's end.
func (v *env) callRoute(method, path, token string) int {
	v.t.Helper()
	return v.send(method, path, token, routeBody(method, path, "nobody")).status
}

// routeBody is a small valid body for a request to a route of the table,
// "" for none; a claim asks for agents.
func routeBody(method, path, agents string) string {
	switch {
	case strings.HasSuffix(path, "/workers/claim"):
		return `{"worker_id":"w","agents":["` + agents + `"],"wait_ms":0}`
	case method == "POST" && strings.HasSuffix(path, "/events") && strings.HasPrefix(path, "/v1/runs/"):
		return `[{"type":"custom","name":"x"}]`
	case strings.HasSuffix(path, "/input"):
		return `{"request_id":"q1","value":1}`
	case strings.HasSuffix(path, "/subscriptions/sub1") && method == "PUT":
		return `{"type":"pull-wake","pattern":"x/**","wake_stream":"wakes"}`
	case strings.HasSuffix(path, "/subscriptions/sub1/streams"):
		return `{"streams":["s1"]}`
	case strings.HasSuffix(path, "/subscriptions/sub1/claim"):
		return `{"worker":"w"}`
	case method == "POST" || method == "PUT":
		return `{}`
	}
	return ""
}

// send makes one request with token and body (JSON, if any), asking for
// JSON answers rather than streams (a Durable Streams read from the
// start), and returns the answer, read whole unless it is a stream.
func (v *env) send(method, path, token, body string) *resp {
	v.t.Helper()
	if method == "GET" && strings.HasPrefix(path, "/v1/stream/") && !strings.Contains(path, "__ds") {
		path += "?offset=-1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, v.url+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out := &resp{status: res.StatusCode, header: res.Header}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		out.body, _ = io.ReadAll(res.Body)
	}
	return out
}

// wsFollow connects to the WebSocket with token and subscribes to the
// run: 200 if subscribed, the error's status if the subscription is
// refused (on the socket, a refusal is per subscription), the dial's if
// the upgrade is.
func (v *env) wsFollow(runID, token string) int {
	v.t.Helper()
	w, refused := v.wsAs(token)
	if w == nil {
		return refused
	}
	defer w.c.CloseNow()
	w.subscribe("s", "run_id", runID, "after", "now")
	switch m := w.read(); {
	case m.Op == "subscribed":
		return 200
	case m.Op == "error" && m.Error.Code == "forbidden":
		return 403
	default:
		v.t.Fatalf("subscribe as %q: %s", token, m.raw)
		return 0
	}
}

// concrete fills a route's placeholders.
func concrete(path, with string) string {
	return regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllString(path, with)
}

func httptestRequest(method, path string) *http.Request {
	req, _ := http.NewRequest(method, "http://tether.test"+path, nil)
	return req
}
