package mapping

import (
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui"
)

// Messages returns the messages the run made so far as AG-UI messages,
// for the request that resumes it upstream: the run's assistant messages
// as Tether holds them, rendered as every conversation an AG-UI agent is
// sent (agui.AgentMessages), its calls named by the upstream's ids.
func (m *Mapper) Messages() []agui.Event {
	var msgs []tether.Message
	for _, msg := range m.order {
		if msg.role != tether.RoleAssistant {
			continue
		}
		tm := tether.Message{ID: msg.id, Role: tether.RoleAssistant}
		if msg.text.Len() > 0 {
			tm.Parts = append(tm.Parts, tether.Part{Type: tether.PartText, Text: msg.text.String()})
		}
		for _, c := range msg.calls {
			p := tether.Part{Type: tether.PartTool, CallID: c.upstream, Name: c.name, InputText: c.args.String()}
			if c.result != nil {
				p.Output, _ = json.Marshal(*c.result)
			}
			tm.Parts = append(tm.Parts, p)
		}
		msgs = append(msgs, tm)
	}
	return agui.AgentMessages(msgs)
}
