// Package e2e holds Tether's end-to-end tests: they build the real tether
// binary once, start it as a separate process per test (on a free loopback
// port, with a fresh data directory), and check what real clients see
// across cuts, kill -9, restarts and graceful shutdowns.
//
// The package has no code of its own: run it with
//
//	go test ./e2e/
//	E2E_RACE=1 go test ./e2e/   # the server binary built with -race
//	E2E_LOG=1 go test -v ./e2e/ # log the servers' output also when tests pass
//
// Start with main_test.go (the harness: build, start, kill9, restart, stop)
// and stream_test.go (a raw SSE reader and the JSON log reader the tests
// compare against).
//
// # Caveats
//
// The tests never assert on timing: they poll for conditions with
// generous deadlines, so a slow machine makes them slower, not red. They
// do need to bind 127.0.0.1 ports (picked by listening on port 0) and,
// for the loopback guard, 0.0.0.0.
package e2e
