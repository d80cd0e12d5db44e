package wake

import "strings"

// Match reports whether a stream path matches a subscription pattern:
// segments separated by "/", where "*" matches exactly one segment and
// "**" any number (also none).
func Match(pattern, path string) bool {
	return matchSegs(split(pattern), split(path))
}

func split(p string) []string {
	var out []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func matchSegs(pat, path []string) bool {
	for len(pat) > 0 {
		switch pat[0] {
		case "**":
			for i := 0; i <= len(path); i++ {
				if matchSegs(pat[1:], path[i:]) {
					return true
				}
			}
			return false
		case "*":
			if len(path) == 0 {
				return false
			}
		default:
			if len(path) == 0 || strings.ReplaceAll(strings.ReplaceAll(pat[0], "%2A", "*"), "%2a", "*") != path[0] {
				return false
			}
		}
		pat, path = pat[1:], path[1:]
	}
	return len(path) == 0
}
