// Package agui projects a Tether thread's log onto the Agent–User
// Interaction protocol (AG-UI): the events and the join prelude that
// `@ag-ui/client`'s HttpAgent, and any other AG-UI front end, reads.
//
// It is a pure mapping, without I/O: a [Projector] takes the thread's
// committed events one at a time ([Projector.Event]), or a snapshot
// ([Projector.Join] for the join prelude, [Projector.Load] to pick up from
// one silently), and returns [Frame]s, each one AG-UI event with the Tether
// offset it came from. The HTTP layer (package api) feeds it from the
// engine's subscriptions and writes the frames; nothing is stored twice.
// [ParseRunAgentInput] and its methods turn an AG-UI request into what the
// engine takes (the run's metadata, its new input messages, the answer to a
// waiting run).
//
// The mapping, table by table, and every decision behind it are in
// docs/ag-ui.md.
//
// # How the state stays consistent
//
// An AG-UI stream opens and closes constructs (a run, a text message, a
// reasoning message, a tool call) that Tether's log does not name: a Tether
// message is one record whose parts grow. The projector keeps which
// constructs are open as a function of the Tether state alone (a running
// message's last part is text: its text message is open; a tool part is
// running: its call is open; a run is running: its AG-UI run is open), and
// reopens them whenever an AG-UI run starts (after an interrupt is answered,
// as the join prelude does). So the prelude made from a snapshot at offset X
// leaves a client exactly where a projector that read the log up to X is,
// and the events after X continue both the same way.
//
// # Caveats
//
// A Tether run that asks for input (run.waiting) is two or more AG-UI runs:
// the first ends with an interrupt outcome, the answer starts the next.
// Events that a Tether run appends while it waits, and runs cancelled
// before they started while another run is shown, have no AG-UI run to
// belong to and are not projected. Steps (STEP_STARTED and STEP_FINISHED
// re-emitted from an upstream AG-UI agent) are not part of the Tether
// state: a step that started before the point a stream starts from is not
// reopened, and its STEP_FINISHED is not sent.
package agui
