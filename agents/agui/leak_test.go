package agui_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/agui"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// An upstream's URL may carry a key (?key=…, user:password@): an
// unreachable upstream is logged without the URL, as it ends the run.
func TestUnreachableUpstreamLogsNoURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	log := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	a, err := agui.New(agui.Options{URL: "http://" + addr + "/agent?key=" + secret, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{"research": a}, runner.Options{Logger: logger})
	rn.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		e.Close()
	})
	if _, _, err := e.CreateThread(context.Background(), "t1", nil); err != nil {
		t.Fatal(err)
	}
	w := &world{e: e, st: st}
	snap := w.wait(t, w.start(t, "", "hi"))
	if r := snap.Runs[0]; r.Status != tether.RunError || r.Error == nil || r.Error.Code != agui.CodeUpstreamError {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
	if got := log.String(); !strings.Contains(got, "ag-ui agent failed") || strings.Contains(got, secret) {
		t.Fatalf("log: %s", got)
	}
	if _, err := agui.New(agui.Options{URL: "ftp://user:" + secret + "@example.com/"}); err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("New: %v", err)
	}
}
