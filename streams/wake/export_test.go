package wake

// HoldTimers makes every lease and retry timer call fired as it starts
// and done as it returns, until the test ends.
func HoldTimers(cleanup func(func()), fired, done func()) {
	timerFired, timerDone = fired, done
	cleanup(func() { timerFired, timerDone = func() {}, func() {} })
}
