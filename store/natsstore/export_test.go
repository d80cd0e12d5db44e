package natsstore

// ForceConsumerScan makes scans read the bucket with an ordered consumer,
// as they do when a pattern matches more than 1024 keys.
func ForceConsumerScan() (restore func()) {
	old := forceConsumerScanAttempts
	forceConsumerScanAttempts = 0
	return func() { forceConsumerScanAttempts = old }
}

// DieAfterPublish makes the store's commits and deletions stop right after
// their publish, as if the node died there: no bucket writes, no purge.
func DieAfterPublish(s *Store, on bool) { s.dieAfterPublish.Store(on) }

// LogSubject returns the subject of a thread's log.
func LogSubject(s *Store, id string) string { return s.logSubject(id) }

// HoldDelivery makes the store's notify consumer stop before the next
// message it handles, until release is called.
func HoldDelivery(s *Store) (release func()) {
	ch := make(chan struct{})
	s.holdDelivery.Store(&ch)
	return func() {
		s.holdDelivery.Store(nil)
		close(ch)
	}
}

// AfterLast makes fn run each time the store has read a thread's last
// message and is about to read its log; nil removes it.
func AfterLast(s *Store, fn func(id string)) {
	if fn == nil {
		s.afterLast.Store(nil)
		return
	}
	s.afterLast.Store(&fn)
}
