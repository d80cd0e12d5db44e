package runs

import "strings"

// parsePointer decodes an RFC 6901 JSON Pointer: empty (the root, nil), or
// "/"-separated tokens in which "~" is always followed by 0 or 1.
func parsePointer(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	if p[0] != '/' {
		return nil, false
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, false
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, true
}

// arrayIndex reads an array index token: "0" or digits without a leading
// zero (RFC 6901 §4), below n.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i := 0
	for j := 0; j < len(tok); j++ {
		c := tok[j]
		if c < '0' || c > '9' || i > (n-int(c-'0'))/10 {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, i < n
}
