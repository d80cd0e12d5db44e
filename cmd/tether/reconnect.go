package main

import (
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

// connNotes says on stderr when a command's stream loses the server and
// when it is back, with the offset it resumes from, so that a server that
// is down or restarting is never met with silence. The subscription
// retries by itself meanwhile (with backoff, for as long as it takes).
type connNotes struct {
	note   func(string)         // writes one line on stderr
	cursor func() tether.Offset // the last offset the command printed
	// server is set by a command whose first request is its subscription
	// (tail): until that opens, a failure is a server not there yet (not
	// started, a wrong --server), not a connection lost.
	server string
	opened bool
	lost   bool
}

// onState is the subscription's OnState; it runs on the iterating
// goroutine, like the command's printing.
func (n *connNotes) onState(st client.State) {
	switch st {
	case client.StateReconnecting:
		if !n.lost {
			n.lost = true
			if n.server != "" && !n.opened {
				n.note(fmt.Sprintf("tether: no answer from the server at %s yet; trying again until it answers (Ctrl-C to stop)…", n.server))
			} else {
				n.note(fmt.Sprintf("tether: lost the connection to the server; reconnecting (resuming %s)…", n.where()))
			}
		}
	case client.StateOpen:
		if n.lost {
			n.lost = false
			if n.server != "" && !n.opened {
				n.note("tether: connected")
			} else {
				n.note(fmt.Sprintf("tether: reconnected; resuming %s", n.where()))
			}
		}
		n.opened = true
	}
}

func (n *connNotes) where() string {
	if c := n.cursor(); c.IsEvent() {
		return "after offset " + string(c)
	}
	return "from the start"
}
