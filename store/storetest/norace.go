//go:build !race

package storetest

// raceEnabled makes the heaviest checks lighter under the race detector,
// which slows a pure-Go SQLite down twentyfold; they keep their full size
// in a normal run.
const raceEnabled = false
