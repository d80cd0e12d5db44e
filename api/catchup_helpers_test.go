package api_test

import (
	"strings"

	"github.com/tetherhq/tether/engine"
)

// catchUpEngine is engine options under which a stream from the start of
// a thread of more than 16 events catches up from the store, 8 events a
// read: the way to a stream that reads its log several times, which a
// store wrapper can then hold or fail.
func catchUpEngine() engine.Options {
	var o engine.Options
	o.Hub.RingSize = 16   // the stream's catch-up reads the store…
	o.Hub.HistoryPage = 8 // …a page of 8 events at a time
	return o
}

// deltas appends n text deltas of "x" to message a1 of a run (extRun)
// in one batch.
func (v *env) deltas(run string, lease []string, n int) {
	v.t.Helper()
	delta := `{"type":"text.delta","message_id":"a1","delta":"x"}`
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", "["+strings.TrimSuffix(strings.Repeat(delta+",", n), ",")+"]", lease...)
}

// longThread creates thread tid with a run of an external worker whose
// message a1 holds n deltas.
func (v *env) longThread(tid string, n int) {
	v.t.Helper()
	v.thread(tid)
	run, lease := v.extRun(tid)
	v.deltas(run, lease, n)
}
