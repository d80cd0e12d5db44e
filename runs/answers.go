package runs

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"slices"
)

// answer is a request of a run that was answered (run.input): its id and
// the SHA-256 of its value as compact JSON. The machine keeps them so that
// a client's repeat of an answer whose outcome it could not learn (a 503,
// a dropped connection) is known for the same answer, and so that a
// worker cannot ask again under an id already answered, which would make
// that repeat answer a question the person never saw (protocol §4).
type answer struct {
	requestID string
	sum       [sha256.Size]byte
}

// answerSum is the digest of an answer's value: its compact JSON, so that
// whitespace does not make two answers differ; a value that is not JSON
// (never stored) is taken as it is.
func answerSum(value json.RawMessage) [sha256.Size]byte {
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	var c bytes.Buffer
	if json.Compact(&c, value) == nil {
		return sha256.Sum256(c.Bytes())
	}
	return sha256.Sum256(value)
}

// withAnswer returns answers with one more. The slice is never changed in
// place (copies of a runState share it), so an answer makes a new one:
// runs ask few questions.
func withAnswer(answers []answer, requestID string, value json.RawMessage) []answer {
	return append(slices.Clip(answers), answer{requestID: requestID, sum: answerSum(value)})
}

// findAnswer returns the last answer to requestID: a log written before
// request ids had to be unique may hold several.
func findAnswer(answers []answer, requestID string) (answer, bool) {
	for i := len(answers) - 1; i >= 0; i-- {
		if a := answers[i]; a.requestID == requestID {
			return a, true
		}
	}
	return answer{}, false
}

// Answered reports whether the run's request requestID was answered
// (run.input), and if so whether with value (the same JSON, whatever its
// whitespace).
func (m *Machine) Answered(runID, requestID string, value json.RawMessage) (answered, same bool) {
	r := m.runs[runID]
	if r == nil {
		return false, false
	}
	return sameAnswer(r.answers, requestID, value)
}

// Answered is Machine.Answered as the Tx sees the run.
func (tx *Tx) Answered(runID, requestID string, value json.RawMessage) (answered, same bool) {
	r := tx.run(runID)
	if r == nil {
		return false, false
	}
	return sameAnswer(r.answers, requestID, value)
}

func sameAnswer(answers []answer, requestID string, value json.RawMessage) (answered, same bool) {
	a, ok := findAnswer(answers, requestID)
	if !ok {
		return false, false
	}
	return true, a.sum == answerSum(value)
}
