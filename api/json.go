package api

import "encoding/json"

// jsonOf encodes v; the values passed are always encodable.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
