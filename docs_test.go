package tether_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The layout in docs/architecture.md ("The parts") names folders and files
// that exist: it named a tether.go that never did.
func TestArchitectureNamesRealFiles(t *testing.T) {
	b, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, parts, ok := strings.Cut(string(b), "## The parts")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## The parts"`)
	}
	_, block, _ := strings.Cut(parts, "```\n")
	block, _, _ = strings.Cut(block, "```")
	names := regexp.MustCompile(`[A-Za-z0-9_./-]+(?:/|\.go)`)
	checked, dir := 0, ""
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// The first field is a folder ("store/sqlitestore/") or files; the
		// description, and its continuation lines, may name what is in that
		// folder, or in the root.
		if !strings.HasPrefix(line, " ") {
			dir = ""
			if strings.HasSuffix(f[0], "/") {
				dir = f[0]
			}
		}
		for _, n := range names.FindAllString(line, -1) {
			if strings.Contains(n, "*") || strings.HasPrefix(n, "/") {
				continue // a pattern, or a URL path (/v1/stream/)
			}
			_, err := os.Stat(n)
			if err != nil && dir != "" {
				_, err = os.Stat(filepath.Join(dir, n))
			}
			if err != nil {
				t.Errorf("docs/architecture.md names %s, which does not exist", n)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Fatalf("checked only %d names", checked)
	}
}

// Every relative link of the repository's Markdown files points to a file
// or folder that exists, and its #anchor to a heading of that file: a doc
// moved or a heading renamed breaks the link here, not for a reader.
func TestMarkdownLinks(t *testing.T) {
	var docs []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "artifacts" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	url := regexp.MustCompile(`^[a-z]+:`)
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(b)), -1) {
			target := m[1]
			if url.MatchString(target) {
				continue // a URL
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: %s does not exist", doc, target, path)
				continue
			}
			if anchor == "" {
				continue
			}
			heads, err := anchors(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", doc, target, err)
			} else if !heads[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", doc, target, path, anchor)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d links in %d files", checked, len(docs))
	}
}

// withoutCode is Markdown text without its fenced code blocks and code
// spans, where "](" is code, not a link.
func withoutCode(s string) string {
	s = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(s, "")
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(s, "")
}

// anchors are the #anchors of a Markdown file's headings as GitHub makes
// them: lower case, punctuation dropped, spaces to hyphens, "-1", "-2" on
// repeats.
func anchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	head := regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*$`)
	punct := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	out, seen := map[string]bool{}, map[string]int{}
	text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(b), "")
	for _, m := range head.FindAllStringSubmatch(text, -1) {
		h := linkText.ReplaceAllString(m[1], "$1")
		s := strings.ReplaceAll(punct.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out, nil
}
