// Package app embeds the chat page that tether serve shows at /.
package app

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the page's files, index.html at the root.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return sub
}
