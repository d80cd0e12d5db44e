package runs

import (
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/nest"
)

// checkKept checks the values an event keeps as they came (metadata, data,
// state, a patch, tool input, output and error, an answer, a request's
// payload, a created message's): they must be UTF-8 and nest at most
// nest.Max levels, since they reach every reader of the thread. A request
// body is checked as a whole as it is read (api), but an in-process
// agent's events come without one, and encoding/json checks neither. Only
// a Tx checks it: a log stored before still folds.
func checkKept(e *tether.Event) error {
	check := func(raw json.RawMessage, field string) error {
		if err := nest.Check(raw); err != nil {
			return badRequest("field %q of %s %v", field, e.Type, err)
		}
		return nil
	}
	for _, f := range [...]struct {
		raw  json.RawMessage
		name string
	}{{e.Metadata, "metadata"}, {e.Input, "input"}, {e.Output, "output"}, {e.Error, "error"},
		{e.Data, "data"}, {e.Value, "value"}, {e.State, "state"}, {e.Patch, "patch"}} {
		if err := check(f.raw, f.name); err != nil {
			return err
		}
	}
	if e.Request != nil {
		if err := check(e.Request.Payload, "request.payload"); err != nil {
			return err
		}
	}
	if m := e.Message; m != nil {
		if err := check(m.Metadata, "message.metadata"); err != nil {
			return err
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			for _, f := range [...]struct {
				raw  json.RawMessage
				name string
			}{{p.Input, "input"}, {p.Output, "output"}, {p.Error, "error"}, {p.Data, "data"}} {
				if err := check(f.raw, "message.parts."+f.name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
