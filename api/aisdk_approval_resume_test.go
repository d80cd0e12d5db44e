package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
)

// TestAISDKApprovalAnswerResumes: the stream of an approval's answer,
// approved or denied, cut after any of its frames, is continued exactly by
// a resume from that frame's offset (TetherChatTransport's reconnect), and
// the message it makes is the one /messages and a rebuild show.
func TestAISDKApprovalAnswerResumes(t *testing.T) {
	for _, approved := range []bool{true, false} {
		t.Run(fmt.Sprint(approved), func(t *testing.T) {
			v := newEnv(t, api.Options{})
			chat := fmt.Sprintf("apr-%v", approved)
			first, run := askApproval(t, v, chat)
			more, held := answerApproval(t, v, chat, approved, "Not now.")
			v.waitRun(run, tether.RunDone)
			// The first stream's last id, then the answer's.
			last := ""
			for _, f := range first {
				if f.id != "" {
					last = f.id
				}
			}
			cuts := []string{last}
			idx := []int{-1}
			for i, f := range more {
				if f.id != "" {
					cuts = append(cuts, f.id)
					idx = append(idx, i)
				}
			}
			var want []string
			for _, g := range more[1:] {
				want = append(want, g.raw)
			}
			for k, after := range cuts {
				res := v.mustDo(200, "GET", fmt.Sprintf("%s/%s/stream?run_id=%s&after=%s", chatAPI, chat, run, after), nil)
				var got []string
				for _, g := range more[1:max(idx[k]+1, 1)] {
					got = append(got, g.raw)
				}
				rest := parseUI(t, string(res.body))
				if len(rest) > 0 && rest[0].chunk["type"] == "start" {
					rest = rest[1:]
				}
				for _, g := range rest {
					got = append(got, g.raw)
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("resumed after %s (frame %d):\n%s\nwant\n%s", after, idx[k], strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			applyUI(t, &held, more)
			var msgs []aisdk.UIMessage
			v.mustDo(200, "GET", chatAPI+"/"+chat+"/messages", nil).json(&msgs)
			var rebuilt aisdk.UIMessage
			applyUI(t, &rebuilt, parseUI(t, string(v.mustDo(200, "GET", chatAPI+"/"+chat+"/stream?run_id="+run, nil).body)))
			b, _ := json.Marshal(msgs[len(msgs)-1])
			c, _ := json.Marshal(rebuilt)
			if string(b) != string(c) {
				t.Errorf("messages %s\nrebuilt  %s", b, c)
			}
			if !approved {
				a, _ := json.Marshal(held)
				if string(a) != string(b) {
					t.Errorf("live     %s\nmessages %s", a, b)
				}
			}
		})
	}
}
