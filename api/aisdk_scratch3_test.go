package api_test

import (
	"testing"

	"github.com/tetherhq/tether/api"
)

func TestScratchCopy(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(200, "POST", chatAPI, chatBody("a", []any{userMsg("u0", "one")}, `{"tokens":3,"delay_ms":0}`))
	r := v.do("POST", chatAPI, chatBody("b", []any{userMsg("u0", "one"), userMsg("u1", "two")}, `{"tokens":3,"delay_ms":0}`))
	t.Logf("copy: %d %.200s", r.status, r.body)
	r = v.do("GET", chatAPI+"/b/messages", nil)
	t.Logf("b: %d %.400s", r.status, r.body)
}
