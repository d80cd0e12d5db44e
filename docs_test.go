package tether_test

import (
	"os"
	"path/filepath"
	"regexp"
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
