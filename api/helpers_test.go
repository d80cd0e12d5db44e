package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/streams"
)

type env struct {
	t   *testing.T
	url string
	e   *engine.Engine
	st  store.Store
	srv *api.Server
	hs  *httptest.Server
}

func newEnv(t *testing.T, opts api.Options) *env {
	t.Helper()
	return newEnvEngine(t, opts, engine.Options{AcceptAgent: func(n string) bool { return n == "demo" }, LeaseTTL: 5 * time.Second})
}

// newEnvEngine is newEnv with engine options; without AcceptAgent, the
// agents "demo" (in process) and "ext" (for a worker) are accepted.
func newEnvEngine(t *testing.T, opts api.Options, eopts engine.Options) *env {
	t.Helper()
	return newEnvStore(t, testutil.OpenStore(t, ""), opts, eopts)
}

// newEnvStore is newEnvEngine over st (a store that injects faults).
func newEnvStore(t *testing.T, st store.Store, opts api.Options, eopts engine.Options) *env {
	t.Helper()
	return newEnvStreams(t, st, opts, eopts, nil)
}

// newEnvStreams is newEnvStore with Durable Streams mounted over the
// engine's hub, with sopts, unless sopts is nil.
func newEnvStreams(t *testing.T, st store.Store, opts api.Options, eopts engine.Options, sopts *streams.Options) *env {
	t.Helper()
	if eopts.AcceptAgent == nil {
		eopts.AcceptAgent = func(n string) bool { return n == "demo" || n == "ext" }
	}
	e := engine.New(st, eopts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ds *streams.Service
	if sopts != nil {
		ds = streams.New(st, e.Hub(), *sopts)
		if err := ds.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		opts.Streams = ds
	}
	rn := runner.New(e, map[string]agents.Agent{"demo": demo.New()}, runner.Options{})
	rn.Start()
	srv := api.New(e, opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		srv.Shutdown()
		hs.Close()
		if ds != nil {
			ds.Close()
		}
		e.Close()
	})
	return &env{t: t, url: hs.URL, e: e, st: st, srv: srv, hs: hs}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r *resp) json(v any) {
	if err := json.Unmarshal(r.body, v); err != nil {
		panic("decode " + string(r.body) + ": " + err.Error())
	}
}

func (r *resp) code() string {
	var b struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

func (v *env) do(method, path string, body any, hdr ...string) *resp {
	v.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, v.url+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{res.StatusCode, res.Header, b}
}

func (v *env) mustDo(want int, method, path string, body any, hdr ...string) *resp {
	v.t.Helper()
	r := v.do(method, path, body, hdr...)
	if r.status != want {
		v.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

func (v *env) thread(id string) {
	v.t.Helper()
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": id})
}

// demoRun starts a demo run and returns its id.
func (v *env) demoRun(thread string, demoOpts string) string {
	v.t.Helper()
	body := `{"agent":"demo","input":{"messages":[{"role":"user","content":"tell me about streams"}]},"metadata":{"demo":` + demoOpts + `}}`
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/"+thread+"/runs", body).json(&run)
	return run.ID
}

func (v *env) waitRun(runID string, status tether.RunStatus) {
	v.t.Helper()
	testutil.Eventually(v.t, 20*time.Second, "run "+string(status), func() bool {
		var body struct{ Run tether.Run }
		v.mustDo(200, "GET", "/v1/runs/"+runID, nil).json(&body)
		return body.Run.Status == status
	})
}

// frame is one SSE frame.
type frame struct {
	id, event, data string
	comment         bool
}

// sseStream reads SSE frames from a live response.
type sseStream struct {
	res *http.Response
	rd  *bufio.Reader
}

func (v *env) sse(method, path string, body any, hdr ...string) *sseStream {
	v.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, v.url+path, rd)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		v.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	s := &sseStream{res: res, rd: bufio.NewReader(res.Body)}
	v.t.Cleanup(func() { res.Body.Close() })
	return s
}

// next returns the next frame, or io.EOF.
func (s *sseStream) next() (frame, error) {
	var f frame
	seen := false
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return f, io.EOF
		}
		line = strings.TrimRight(line, "\n")
		if line == "" {
			if seen {
				return f, nil
			}
			continue
		}
		seen = true
		switch {
		case strings.HasPrefix(line, ":"):
			f.comment = true
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = line[6:]
		}
	}
}

// all reads frames until the stream ends.
func (s *sseStream) all() []frame {
	var out []frame
	for {
		f, err := s.next()
		if err != nil {
			return out
		}
		out = append(out, f)
	}
}

func (s *sseStream) close() { s.res.Body.Close() }

func eventFrames(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if f.id != "" && f.event != "snapshot" {
			out = append(out, f)
		}
	}
	return out
}
