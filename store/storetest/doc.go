// Package storetest is the conformance suite of store.Store: every
// implementation runs it from its own tests, like testing/slogtest.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t testing.TB, dir string) store.Store {
//				s, err := mystore.Open(filepath.Join(dir, "data"))
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//		})
//	}
//
// The suite only uses the store.Store interface. It checks the contract
// documented there: atomic batches and their preconditions, offsets that
// are strictly increasing and never reused (also across a delete, a reopen
// and a crash), exact cursor checks, notification order, the run and
// thread rows, the listing, and loads that see one state of a thread
// (LoadThread raced against deletes and creations of the thread).
//
// # Caveats
//
// The crash test re-executes the test binary (os.Args[0]) with
// -test.run set to the test that called Run and the environment variable
// TETHER_STORETEST_CHILD, then kills it with SIGKILL while it appends. The
// calling test must therefore behave the same when run alone, and Run must
// be called before the test does anything that the child should not do.
// A store that needs a server (not just a directory) must make Harness.Open
// work from that child process too.
//
// The suite takes a few seconds, most of it in the concurrency tests; it
// does not skip anything under -short.
package storetest
