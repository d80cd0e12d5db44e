package streams_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
	"github.com/tetherhq/tether/streams"
)

// node is one Tether node's streams: its own NATS store (connection,
// caches, notify consumer), hub and Service, on a JetStream server shared
// with the other nodes.
type node struct {
	st  *natsstore.Store
	hub *hub.Hub
	svc *streams.Service
}

// cluster starts an in-process nats-server with JetStream and n nodes on
// it, sharing one stream and bucket, their clocks set by c (nil: the real
// time).
func cluster(t *testing.T, n int, c *clock) []*node {
	t.Helper()
	s := natstest.StartServer(t)
	urls := make([]string, n)
	for i := range urls {
		urls[i] = s.ClientURL()
	}
	return nodesOn(t, urls, 1, c)
}

// nodesOn starts a node on each of urls (of servers already running),
// sharing a stream and bucket of the given replicas.
func nodesOn(t *testing.T, urls []string, replicas int, c *clock) []*node {
	t.Helper()
	nodes := make([]*node, len(urls))
	for i := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := natsstore.Open(ctx, natsstore.Options{URL: urls[i], Replicas: replicas, Node: fmt.Sprintf("n%d", i+1), Timeout: 20 * time.Second})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		h := hub.New(st.ReadPage, hub.Options{})
		st.SetNotify(func(c *store.Committed) { h.Publish(c.ThreadID, c.Before, c.Records) })
		opts := streams.Options{Shared: true}
		if c != nil {
			opts.Now = c.Now
		}
		svc := streams.New(st, h, opts)
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &node{st: st, hub: h, svc: svc}
		t.Cleanup(func() {
			svc.Close()
			h.Close()
			st.Close()
		})
	}
	return nodes
}

func (n *node) append(t *testing.T, req streams.AppendRequest) *streams.AppendResult {
	t.Helper()
	res, err := n.svc.Append(ctxT(t), req)
	if err != nil {
		t.Fatalf("append to %s: %v", req.Path, err)
	}
	return res
}

// messages reads a JSON stream from the start.
func (n *node) messages(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for off := "-1"; ; {
		res, err := n.svc.Read(ctxT(t), path, off)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		for _, it := range res.Items {
			out = append(out, string(it))
		}
		if res.UpToDate {
			return out
		}
		off = res.Next
	}
}

// Appends from two nodes to one stream, interleaved and concurrent: none is
// lost or refused, and both nodes read the same stream.
func TestNodesInterleavedAppends(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "s", ContentType: "application/json"}); err != nil {
		t.Fatal(err)
	}
	// Turns: each node's view of the stream is stale at every append.
	for i := range 10 {
		n := ns[i%2]
		n.append(t, streams.AppendRequest{Path: "s", ContentType: "application/json", Body: []byte(strconv.Itoa(i))})
	}
	// Together.
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range 2 * writers {
		n := ns[w%2]
		wg.Go(func() {
			for i := range each {
				body := fmt.Sprintf(`"w%d-%d"`, w, i)
				if _, err := n.svc.Append(ctx, streams.AppendRequest{Path: "s", ContentType: "application/json", Body: []byte(body)}); err != nil {
					t.Errorf("append %s: %v", body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := a.messages(t, "s")
	if want := 10 + 2*writers*each; len(got) != want {
		t.Fatalf("%d messages, want %d", len(got), want)
	}
	for i := range 10 {
		if got[i] != strconv.Itoa(i) {
			t.Fatalf("message %d is %s", i, got[i])
		}
	}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m] {
			t.Fatalf("%s twice", m)
		}
		seen[m] = true
	}
	if other := b.messages(t, "s"); fmt.Sprint(other) != fmt.Sprint(got) {
		t.Fatal("the nodes read different streams")
	}
	ha, _ := a.svc.Head(ctx, "s")
	hb, _ := b.svc.Head(ctx, "s")
	if ha.Tail != hb.Tail {
		t.Fatalf("tails %s and %s", ha.Tail, hb.Tail)
	}
}

// Three nodes, each connected to another server of a three-server
// JetStream cluster (stream and bucket R3): appends from all of them,
// a close on one seen by the others, a deletion and a creation again.
func TestNodesOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a JetStream cluster takes seconds to start")
	}
	srvs := natstest.StartCluster(t, 3)
	urls := make([]string, len(srvs))
	for i := range srvs {
		// Each node prefers its own server.
		urls[i] = natstest.URLs(append([]*server.Server{srvs[i]}, append(slices.Clone(srvs[:i]), srvs[i+1:]...)...)...)
	}
	ns := nodesOn(t, urls, 3, nil)
	ctx := ctxT(t)
	if _, err := ns[0].svc.Create(ctx, streams.CreateRequest{Path: "s", ContentType: "application/json"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 6 {
		n := ns[w%3]
		wg.Go(func() {
			for i := range 20 {
				body := fmt.Sprintf(`"w%d-%d"`, w, i)
				if _, err := n.svc.Append(ctx, streams.AppendRequest{Path: "s", ContentType: "application/json", Body: []byte(body)}); err != nil {
					t.Errorf("append %s: %v", body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, n := range ns {
		if got := n.messages(t, "s"); len(got) != 120 {
			t.Fatalf("%d messages", len(got))
		}
	}
	ns[1].append(t, streams.AppendRequest{Path: "s", Close: true})
	_, err := ns[2].svc.Append(ctx, streams.AppendRequest{Path: "s", ContentType: "application/json", Body: []byte("1")})
	wantCode(t, err, streams.CodeConflict)
	if err := ns[2].svc.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns[0].svc.Create(ctx, streams.CreateRequest{Path: "s", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	ns[1].append(t, streams.AppendRequest{Path: "s", ContentType: "text/plain", Body: []byte("new")})
	if got, _ := newReader(ns[2]).text(t, "s"); got != "new" {
		t.Fatalf("the stream created again reads %q", got)
	}
}

// An idempotent producer whose appends go to one node then another (a
// client retrying through a load balancer): duplicates are recognised, new
// sequence numbers accepted, and stale epochs fenced, whichever node saw
// what before.
func TestNodesProducerRetries(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "p", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	app := func(n *node, epoch, seq int64, body string) (*streams.AppendResult, error) {
		return n.svc.Append(ctx, streams.AppendRequest{Path: "p", ContentType: "text/plain", Body: []byte(body),
			Producer: &streams.Producer{ID: "w", Epoch: epoch, Seq: seq}})
	}
	mustApp := func(n *node, epoch, seq int64, body string, dup bool) {
		t.Helper()
		res, err := app(n, epoch, seq, body)
		if err != nil {
			t.Fatalf("epoch %d seq %d: %v", epoch, seq, err)
		}
		if res.Duplicate != dup {
			t.Fatalf("epoch %d seq %d: duplicate %v, want %v", epoch, seq, res.Duplicate, dup)
		}
	}
	mustApp(b, 0, 0, "0", false) // b knows the producer at seq 0
	mustApp(a, 0, 1, "1", false)
	mustApp(a, 0, 2, "2", false)
	mustApp(b, 0, 2, "2", true)  // a retry on the other node: a duplicate, not a gap
	mustApp(b, 0, 3, "3", false) // next on b, though b last saw seq 0
	mustApp(a, 0, 3, "3", true)  // and the retry back on a
	mustApp(a, 0, 1, "1", true)
	_, err := app(a, 0, 5, "5")
	wantCode(t, err, streams.CodeConflict) // a real gap
	mustApp(b, 1, 0, "new", false)         // a new epoch on b…
	_, err = app(a, 0, 4, "4")             // …fences the old one on a
	wantCode(t, err, streams.CodeForbidden)
	var se *streams.Error
	if !errors.As(err, &se) || se.Producer == nil || se.Producer.Epoch != 1 {
		t.Fatalf("refusal %+v", err)
	}
	mustApp(a, 1, 1, "more", false)
	if got, _ := newReader(a).text(t, "p"); got != "0123newmore" {
		t.Fatalf("stream %q", got)
	}

	// Stream-Seq is checked against the last one accepted, on any node.
	seq := func(n *node, s string) error {
		_, err := n.svc.Append(ctx, streams.AppendRequest{Path: "p", ContentType: "text/plain", Body: []byte("."), Seq: s})
		return err
	}
	if err := seq(b, "a"); err != nil {
		t.Fatal(err)
	}
	if err := seq(a, "b"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, seq(b, "b"), streams.CodeConflict)
	if err := seq(b, "c"); err != nil {
		t.Fatal(err)
	}
}

// A stream closed on one node is closed on the others, at once.
func TestNodesClose(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "c", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	b.append(t, streams.AppendRequest{Path: "c", ContentType: "text/plain", Body: []byte("x")}) // b caches it open
	f, err := b.svc.Follow(ctx, "c", streams.OffsetNow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	closed := a.append(t, streams.AppendRequest{Path: "c", ContentType: "text/plain", Body: []byte("y"), Close: true})

	_, err = b.svc.Append(ctx, streams.AppendRequest{Path: "c", ContentType: "text/plain", Body: []byte("z")})
	wantCode(t, err, streams.CodeConflict)
	var se *streams.Error
	if !errors.As(err, &se) || !se.Closed || se.Tail != closed.Tail {
		t.Fatalf("refusal %+v, want closed at %s", err, closed.Tail)
	}
	if res := b.append(t, streams.AppendRequest{Path: "c", Close: true}); !res.Closed || res.Tail != closed.Tail {
		t.Fatalf("close of the closed stream: %+v", res)
	}
	if h, err := b.svc.Head(ctx, "c"); err != nil || !h.Closed || h.Tail != closed.Tail {
		t.Fatalf("head on b: %+v, %v", h, err)
	}
	// b's live reader gets the last data and the close.
	got := ""
	for {
		bt, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range bt.Items {
			got += string(it)
		}
		if bt.Closed {
			break
		}
	}
	if got != "y" {
		t.Fatalf("follower on b got %q", got)
	}
}

// A stream deleted on one node is gone on the others, and its path can be
// used again from any node, with another configuration.
func TestNodesDeleteAndCreate(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	ttl := int64(3600)
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "d", ContentType: "text/plain", TTL: &ttl, Body: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	b.append(t, streams.AppendRequest{Path: "d", ContentType: "text/plain", Body: []byte("!"), Seq: "5",
		Producer: &streams.Producer{ID: "w", Epoch: 3, Seq: 0}}) // b caches all of it
	f, err := b.svc.Follow(ctx, "d", streams.OffsetNow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := a.svc.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	// b's live reader ends.
	if _, err := f.Next(ctx); streams.CodeOf(err) != streams.CodeNotFound {
		t.Fatalf("follower on b after the deletion: %v", err)
	}
	_, err = b.svc.Head(ctx, "d")
	wantCode(t, err, streams.CodeNotFound)
	_, err = b.svc.Append(ctx, streams.AppendRequest{Path: "d", ContentType: "text/plain", Body: []byte("x")})
	wantCode(t, err, streams.CodeNotFound)
	wantCode(t, b.svc.Delete(ctx, "d"), streams.CodeNotFound)

	// Created again on b: a JSON stream without TTL, Stream-Seq or
	// producers.
	res, err := b.svc.Create(ctx, streams.CreateRequest{Path: "d", ContentType: "application/json"})
	if err != nil || !res.Created || res.Info.TTL != nil {
		t.Fatalf("create again: %+v, %v", res, err)
	}
	_, err = a.svc.Append(ctx, streams.AppendRequest{Path: "d", ContentType: "text/plain", Body: []byte("x")})
	wantCode(t, err, streams.CodeConflict) // a's old content type is gone
	a.append(t, streams.AppendRequest{Path: "d", ContentType: "application/json", Body: []byte(`1`), Seq: "1",
		Producer: &streams.Producer{ID: "w", Epoch: 0, Seq: 0}})
	if h, err := a.svc.Head(ctx, "d"); err != nil || h.ContentType != "application/json" || h.TTL != nil {
		t.Fatalf("head on a: %+v, %v", h, err)
	}
	if got := a.messages(t, "d"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("the new stream holds %q", got)
	}

	// The same with a stream that both nodes last saw empty: its version
	// is the same before and after, its configuration is not.
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "e", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Head(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Create(ctx, streams.CreateRequest{Path: "e", ContentType: "text/plain"}); err != nil { // b caches it
		t.Fatal(err)
	}
	if err := a.svc.Delete(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "e", ContentType: "application/json", Closed: true}); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Append(ctx, streams.AppendRequest{Path: "e", ContentType: "text/plain", Body: []byte("x")})
	wantCode(t, err, streams.CodeConflict)
	_, err = b.svc.Append(ctx, streams.AppendRequest{Path: "e", ContentType: "application/json", Body: []byte("1")})
	wantCode(t, err, streams.CodeConflict) // closed
	if res, err := b.svc.Create(ctx, streams.CreateRequest{Path: "e", ContentType: "text/plain"}); err == nil {
		t.Fatalf("b confirmed the old configuration: %+v", res)
	}

	// Created on both nodes at once: one creates it, the other confirms it
	// (same configuration) or refuses (another one).
	for round, cts := range [][2]string{{"text/plain", "text/plain"}, {"text/plain", "application/json"}} {
		path := fmt.Sprintf("race%d", round)
		var wg sync.WaitGroup
		results := make([]*streams.CreateResult, 2)
		errs := make([]error, 2)
		for i, n := range ns {
			wg.Go(func() {
				results[i], errs[i] = n.svc.Create(ctx, streams.CreateRequest{Path: path, ContentType: cts[i]})
			})
		}
		wg.Wait()
		created := 0
		for i := range ns {
			if errs[i] == nil && results[i].Created {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("%s: created %d times: %+v %v", path, created, results, errs)
		}
		if cts[0] == cts[1] && (errs[0] != nil || errs[1] != nil) {
			t.Fatalf("%s: %v", path, errs)
		}
		if cts[0] != cts[1] && streams.CodeOf(errs[0])+streams.CodeOf(errs[1]) != streams.CodeConflict {
			t.Fatalf("%s: %v", path, errs)
		}
	}
}

// Forks created on one node keep their sources on every node: deleting a
// source that a fork reads (on another node) only marks it deleted, and
// deleting the last fork removes it.
func TestNodesForks(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "src", ContentType: "text/plain", Body: []byte("AB")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Head(ctx, "src"); err != nil { // b caches it
		t.Fatal(err)
	}
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "fork", ForkedFrom: "src"}); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Delete(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		_, err := n.svc.Head(ctx, "src")
		wantCode(t, err, streams.CodeGone)
		if got, _ := newReader(n).text(t, "fork"); got != "AB" {
			t.Fatalf("the fork reads %q", got)
		}
		_, err = n.svc.Create(ctx, streams.CreateRequest{Path: "fork2", ForkedFrom: "src"})
		wantCode(t, err, streams.CodeConflict)
	}
	if err := b.svc.Delete(ctx, "fork"); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		_, err := n.svc.Head(ctx, "src")
		wantCode(t, err, streams.CodeNotFound)
	}
	if _, err := a.st.Thread(ctx, "ds:src"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the source is still in the store: %v", err)
	}

	// A fork and the deletion of its source, on two nodes at once: either
	// the fork is created and the source kept (gone), or the fork is
	// refused and the source removed. Never a fork without its source.
	for i := range 10 {
		src, fork := fmt.Sprintf("s%d", i), fmt.Sprintf("f%d", i)
		if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: src, Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.svc.Head(ctx, src); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ferr, derr error
		wg.Go(func() { _, ferr = a.svc.Create(ctx, streams.CreateRequest{Path: fork, ForkedFrom: src}) })
		wg.Go(func() { derr = b.svc.Delete(ctx, src) })
		wg.Wait()
		if derr != nil {
			t.Fatalf("delete %s: %v", src, derr)
		}
		_, herr := a.svc.Head(ctx, src)
		if ferr == nil {
			wantCode(t, herr, streams.CodeGone)
			if got, _ := newReader(b).text(t, fork); got != "x" {
				t.Fatalf("%s reads %q", fork, got)
			}
		} else {
			if c := streams.CodeOf(ferr); c != streams.CodeNotFound && c != streams.CodeConflict {
				t.Fatalf("fork %s: %v", fork, ferr)
			}
			wantCode(t, herr, streams.CodeNotFound)
			_, err := b.svc.Head(ctx, fork)
			wantCode(t, err, streams.CodeNotFound)
		}
	}
}

// A TTL counts reads on every node: a stream read only through one node
// does not expire on another.
func TestNodesTTL(t *testing.T) {
	c := newClock()
	ns := cluster(t, 2, c)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	ttl := int64(10)
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "ttl", TTL: &ttl}); err != nil {
		t.Fatal(err)
	}
	c.Add(8 * time.Second)
	if _, err := b.svc.Read(ctx, "ttl", streams.OffsetNow); err != nil {
		t.Fatal(err)
	}
	// b records the read in the store in the background.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := a.st.Producer(ctx, "ds:ttl", "\x1fread"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read was not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Add(8 * time.Second) // 16s after the creation, 8s after b's read
	a.svc.Sweep(ctx)
	if _, err := a.svc.Head(ctx, "ttl"); err != nil {
		t.Fatalf("a expired a stream read on b: %v", err)
	}
	// a counts from b's read plus a quarter of the TTL (b records a read
	// only that often).
	c.Add(5 * time.Second)
	_, err := a.svc.Head(ctx, "ttl")
	wantCode(t, err, streams.CodeNotFound)
	_, err = b.svc.Head(ctx, "ttl")
	wantCode(t, err, streams.CodeNotFound)
}

// reader reads byte streams of one node.
type reader struct{ n *node }

func newReader(n *node) reader { return reader{n} }

func (r reader) text(t *testing.T, path string) (string, error) {
	t.Helper()
	out := ""
	for off := "-1"; ; {
		res, err := r.n.svc.Read(ctxT(t), path, off)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		for _, it := range res.Items {
			out += string(it)
		}
		if res.UpToDate {
			return out, nil
		}
		off = res.Next
	}
}

// A catch-up read on a shared store, through another node than the
// writer's, of a fork over a MiB (ReadBytes): the part past what it keeps
// in memory is read again from JetStream, across the fork's segments.
func TestNodesCatchUp(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	part := func(c byte) []byte { return bytes.Repeat([]byte{c}, 700<<10) }
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "big", ContentType: "application/octet-stream", Body: part('a')}); err != nil {
		t.Fatal(err)
	}
	a.append(t, streams.AppendRequest{Path: "big", ContentType: "application/octet-stream", Body: part('b')})
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "big-fork", ForkedFrom: "big"}); err != nil {
		t.Fatal(err)
	}
	a.append(t, streams.AppendRequest{Path: "big", ContentType: "application/octet-stream", Body: part('x')})
	mid := a.append(t, streams.AppendRequest{Path: "big-fork", ContentType: "application/octet-stream", Body: part('c')}).Tail
	a.append(t, streams.AppendRequest{Path: "big-fork", ContentType: "application/octet-stream", Body: part('d')})
	whole := slices.Concat(part('a'), part('b'), part('c'), part('d'))
	for off, want := range map[string][]byte{"-1": whole, mid: part('d')} {
		cu, err := b.svc.CatchUp(ctx, "big-fork", off)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := cu.Each(ctx, func(items [][]byte) error { got = append(got, bytes.Join(items, nil)...); return nil }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !cu.UpToDate || cu.Bytes != int64(len(want)) {
			t.Fatalf("from %s: %d bytes (announced %d), want %d; up to date %v", off, len(got), cu.Bytes, len(want), cu.UpToDate)
		}
	}
}

// On JetStream too, a sub-offset fork (on another node) reaches into the
// whole of an append stored in pieces.
func TestNodesForkSubOffsetAcrossPieces(t *testing.T) {
	ns := cluster(t, 2, nil)
	a, b := ns[0], ns[1]
	ctx := ctxT(t)
	big := bigBytes(600 << 10) // three pieces of at most 256 KiB
	if _, err := a.svc.Create(ctx, streams.CreateRequest{Path: "src", Body: big}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Create(ctx, streams.CreateRequest{Path: "fork", ForkedFrom: "src", ForkOffset: streams.ZeroOffset, ForkSubOffset: 500 << 10}); err != nil {
		t.Fatal(err)
	}
	if got, _ := newReader(a).text(t, "fork"); got != string(big[:500<<10]) {
		t.Fatalf("the fork reads %d bytes, want %d", len(got), 500<<10)
	}
	_, err := a.svc.Create(ctx, streams.CreateRequest{Path: "past", ForkedFrom: "src", ForkOffset: streams.ZeroOffset, ForkSubOffset: 600<<10 + 1})
	wantCode(t, err, streams.CodeBadRequest)
}
