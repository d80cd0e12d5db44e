package wake

import "strings"

// Match reports whether a stream path matches a subscription pattern:
// segments separated by "/", where "*" matches exactly one segment and
// "**" any number (also none); "%2A" in a segment is a literal "*".
//
// It takes time proportional to the pattern's segments times the path's,
// whatever the pattern: a pattern is matched against every stream when its
// subscription is made and against every stream appended to after, so one
// that took exponential time (trying every split of the path between its
// "**"s) would keep the server matching for good.
func Match(pattern, path string) bool {
	raw := split(pattern)
	pat := make([]globSeg, len(raw))
	for i, seg := range raw {
		switch seg {
		case "*":
			pat[i] = globSeg{kind: segOne}
		case "**":
			pat[i] = globSeg{kind: segAny}
		default:
			pat[i] = globSeg{lit: strings.ReplaceAll(strings.ReplaceAll(seg, "%2A", "*"), "%2a", "*")}
		}
	}
	return matchSegs(pat, split(path))
}

// globSeg is a segment of a pattern: a literal, "*" or "**".
type globSeg struct {
	kind segKind
	lit  string // for segLiteral, unescaped
}

type segKind int

const (
	segLiteral segKind = iota
	segOne             // "*": one segment
	segAny             // "**": any number of segments
)

func split(p string) []string {
	var out []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// matchSegs is the greedy wildcard match: a "**" first takes no segment,
// and on a mismatch only the last "**" seen takes one more, the rest of
// the pattern being tried again from there. Going back to an earlier "**"
// never helps: whatever it could take, the last one can take as well.
func matchSegs(pat []globSeg, path []string) bool {
	p, s := 0, 0
	star, mark := -1, 0 // the last "**" seen, and where in path its match ends
	for s < len(path) {
		switch {
		case p < len(pat) && pat[p].kind == segAny:
			star, mark = p, s
			p++
		case p < len(pat) && (pat[p].kind == segOne || pat[p].kind == segLiteral && pat[p].lit == path[s]):
			p++
			s++
		case star >= 0:
			mark++
			p, s = star+1, mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p].kind == segAny {
		p++
	}
	return p == len(pat)
}
