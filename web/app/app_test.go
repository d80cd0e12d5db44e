package app

import (
	"io/fs"
	"strings"
	"testing"
)

// The page is built into static/ and committed (see README.md); this
// catches a checkout where the bundle is missing or was not built.
func TestFS(t *testing.T) {
	page := FS()
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		b, err := fs.ReadFile(page, name)
		if err != nil {
			t.Fatalf("%s: %v (build it with `npm run build -w app` in web/)", name, err)
		}
		if len(b) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	index, _ := fs.ReadFile(page, "index.html")
	for _, ref := range []string{`src="app.js"`, `href="app.css"`} {
		if !strings.Contains(string(index), ref) {
			t.Errorf("index.html does not load %s", ref)
		}
	}
}
