package api

// onFreshStack runs f on a goroutine of its own and returns once f has.
//
// A goroutine starts with a 2 KiB stack and Go doubles it when a call
// needs more; a parked goroutine's stack is shrunk only while it uses less
// than a quarter of it. So a goroutine that lives as long as a connection
// and once ran something deep (a socket write, a store read, JSON) keeps a
// stack of 4 KiB or more for good, though it only waits. Running the deep
// part here leaves the caller's stack as it was, for the price of starting
// a goroutine (well under a microsecond). The caller waits: ordering is
// as if f ran in place.
func onFreshStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}
