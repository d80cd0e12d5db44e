package api

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in    string
		per   float64
		burst int
	}{
		{"", 0, 0}, {"0", 0, 0}, {"0/s", 0, 0},
		{"10/s", 10, 10}, {"600/m", 10, 600}, {"3600/h", 1, 3600},
		{"64KiB/s", 64 << 10, 64 << 10}, {"1MiB/m", float64(1<<20) / 60, 1 << 20},
	} {
		r, err := ParseRate(c.in)
		if err != nil || r.PerSecond != c.per || r.Burst != c.burst {
			t.Errorf("ParseRate(%q) = %+v, %v; want %v/s burst %d", c.in, r, err, c.per, c.burst)
		}
	}
	for _, in := range []string{"10", "10/d", "x/s", "-1/s", "1.5/s", "10KB/s", "99999999999GiB/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q): no error", in)
		}
	}
}

func TestQuotaKey(t *testing.T) {
	for _, c := range []struct{ remote, want string }{
		{"127.0.0.1:5000", ""},
		{"[::1]:5000", ""},
		{"[::ffff:127.0.0.1]:5000", ""},
		{"192.0.2.7:5000", "ip:192.0.2.7"},
		{"[::ffff:192.0.2.7]:5000", "ip:192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "ip:2001:db8:1:2::/64"},
		{"garbage", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if got := quotaKey(r); got != c.want {
			t.Errorf("quotaKey from %s = %q, want %q", c.remote, got, c.want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	if got := quotaKey(withPrincipal(r, keyPrincipal(Key{id: "k_abc"}))); got != "key:k_abc" {
		t.Errorf("quotaKey with a key = %q", got)
	}
	if got := quotaKey(withPrincipal(r, Principal{ID: "sub:alice", JWT: true, Sub: "alice"})); got != "sub:alice" {
		t.Errorf("quotaKey with a signed token = %q", got)
	}
}

// Principals whose buckets have filled up again and that hold no stream
// are dropped; past MaxPrincipals new ones share one set of counters, so
// that the limiter's memory is bounded whatever the number of clients.
func TestQuotasBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	lim := Limits{Threads: Rate{PerSecond: 1, Burst: 2}, MaxPrincipals: 3}
	q := newQuotas(lim, func() time.Time { return now })
	use := func(key string) time.Duration {
		_, d := q.take(q.get(key).threads, 1)
		return d
	}
	use("a")
	use("b")
	closeStream, ok := q.openStream("c")
	if !ok {
		t.Fatal("openStream refused")
	}
	if q.size() != 3 {
		t.Fatalf("%d principals, want 3", q.size())
	}
	// Full: d shares the overflow counters with e.
	use("d")
	use("d")
	if d := use("e"); d == 0 {
		t.Fatal("past MaxPrincipals, a new principal got counters of its own")
	}
	// A second on, a and b (and the overflow) are full again; c holds a
	// stream.
	now = now.Add(2 * time.Second)
	if d := use("f"); d != 0 {
		t.Fatalf("f refused (%s) after idle principals could be dropped", d)
	}
	if q.size() != 2 { // c, f
		t.Fatalf("%d principals after the sweep, want 2", q.size())
	}
	closeStream()
	closeStream() // twice is once
	now = now.Add(2 * sweepEvery)
	q.get("g")
	if q.size() != 1 { // g
		t.Fatalf("%d principals after a periodic sweep, want 1", q.size())
	}
}

// The budget serves waiters in order and never hands out more than its
// size; a body larger than the whole budget passes alone.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(10, 0)
		ctx := context.Background()
		r1, _, _ := b.acquire(ctx, "", 6)
		got := make(chan int, 3)
		go func() {
			r, _, _ := b.acquire(ctx, "", 8)
			got <- 8
			r()
		}()
		synctest.Wait()
		go func() {
			r, _, _ := b.acquire(ctx, "", 3) // fits now, but waits behind 8
			got <- 3
			r()
		}()
		synctest.Wait()
		if len(got) != 0 {
			t.Fatal("a waiter was served while the budget was short or another waited before it")
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, over, err := b.acquire(tctx, "", 1); err == nil || over {
			t.Fatalf("acquire that timed out while others wait: %v, over its share %v", err, over)
		}
		r1()
		r1() // twice is once
		if first, second := <-got, <-got; first != 8 || second != 3 {
			t.Fatalf("served %d then %d, want 8 then 3", first, second)
		}
		big, _, err := b.acquire(ctx, "", 100)
		if err != nil || b.inUse() != 10 {
			t.Fatalf("a body over the budget: %v, %d in use", err, b.inUse())
		}
		big()
		if b.inUse() != 0 {
			t.Fatalf("%d in use after every release", b.inUse())
		}
	})
}

// tryAcquire takes free bytes at once, and never jumps the line: while a
// request waits, or the bytes are taken, it refuses.
func TestBudgetTryAcquire(t *testing.T) {
	b := newBudget(10, 0)
	r1, ok := b.tryAcquire("", 6)
	if !ok {
		t.Fatal("6 of 10 free bytes refused")
	}
	if _, ok := b.tryAcquire("", 6); ok {
		t.Fatal("6 bytes taken with 4 free")
	}
	waiting := make(chan func(), 1)
	go func() {
		r, _, _ := b.acquire(context.Background(), "", 8)
		waiting <- r
	}()
	for b.waitersLen() == 0 {
		runtime.Gosched()
	}
	if _, ok := b.tryAcquire("", 1); ok {
		t.Fatal("1 byte taken ahead of a waiter")
	}
	r1()
	(<-waiting)()
	if b.inUse() != 0 {
		t.Fatalf("%d bytes still in use", b.inUse())
	}
}

// A principal holds at most its share of the budget, or one body of any
// size when it holds nothing; past it, its requests wait for its own
// bytes to come back while other principals' pass, and a wait that ends
// says it was over the share. The key "" (not limited) has no share.
func TestBudgetShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(100, 25)
		ctx := context.Background()
		a1, ok := b.tryAcquire("a", 60) // holds nothing: one body of any size
		if !ok {
			t.Fatal("a principal holding nothing was refused a body larger than its share")
		}
		if _, ok := b.tryAcquire("a", 1); ok {
			t.Fatal("a principal over its share took more at once")
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, over, err := b.acquire(tctx, "a", 1); err == nil || !over {
			t.Fatalf("a principal over its share: %v, over its share %v; want a refusal over the share", err, over)
		}
		cancel()
		got := make(chan string, 4)
		go func() {
			r, _, _ := b.acquire(ctx, "a", 10)
			got <- "a"
			r()
		}()
		synctest.Wait()
		// a waits; b passes it, through the queue as well as at once.
		rb, _, err := b.acquire(ctx, "b", 20)
		if err != nil || len(got) != 0 {
			t.Fatalf("another principal behind one over its share: %v, %d served", err, len(got))
		}
		rb2, ok := b.tryAcquire("b", 5) // 25: b's whole share
		if ok {
			t.Fatal("tryAcquire went ahead of a waiter")
		}
		rb2, _, err = b.acquire(ctx, "b", 5)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.tryAcquire("", 15); ok {
			t.Fatal("tryAcquire went ahead of a waiter")
		}
		ru, _, _ := b.acquire(ctx, "", 15) // no share: 100 in use
		if b.inUse() != 100 {
			t.Fatalf("%d in use, want 100", b.inUse())
		}
		a1()
		if <-got != "a" {
			t.Fatal("a's waiter was not served once its own bytes came back")
		}
		rb()
		rb2()
		ru()
		synctest.Wait()
		if b.inUse() != 0 || len(b.held) != 0 || len(b.queues) != 0 || b.turns.Len() != 0 || b.waiting != 0 {
			t.Fatalf("after every release: %d in use, %d held, %d queues, %d turns, %d waiting", b.inUse(), len(b.held), len(b.queues), b.turns.Len(), b.waiting)
		}
	})
}

// Principals waiting take turns, one request each: a principal with many
// requests waiting does not make one that came later with a single
// request wait behind all of them. Within a principal, order of arrival.
func TestBudgetTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(10, -1)
		ctx := context.Background()
		all, _, _ := b.acquire(ctx, "x", 10)
		served := make(chan string, 8)
		wait := func(key string, i int) {
			go func() {
				r, _, _ := b.acquire(ctx, key, 10)
				served <- key + strconv.Itoa(i)
				r()
			}()
			synctest.Wait()
		}
		for i := range 3 {
			wait("a", i)
		}
		wait("b", 0)
		wait("c", 0)
		wait("b", 1)
		all()
		var order []string
		for range 6 {
			order = append(order, <-served)
		}
		if got, want := strings.Join(order, " "), "a0 b0 c0 a1 b1 a2"; got != want {
			t.Fatalf("served %s, want %s", got, want)
		}
	})
}

func (b *budget) waitersLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// The common path: a small body taken and given back with nobody waiting.
//
//	go test ./api -run '^$' -bench BudgetSmallBody -count 5
func BenchmarkBudgetSmallBody(b *testing.B) {
	for _, key := range []string{"", "key:k_0123456789abcdef"} {
		b.Run("key="+key, func(b *testing.B) {
			bg := newBudget(8<<20, 2<<20)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					release, ok := bg.tryAcquire(key, 250)
					if !ok {
						b.Fatal("refused")
					}
					release()
				}
			})
		})
	}
}
