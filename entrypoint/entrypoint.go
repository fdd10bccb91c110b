// Package entrypoint holds the Python that runs inside the sandbox.
//
// The host starts `python3 -u -c <Bootstrap>` and writes a boot frame whose
// files are Files; nothing is written to the container's disk.
package entrypoint

import (
	"embed"
	"strings"
)

//go:embed *.py manual.md
var fsys embed.FS

// Main is the module the bootstrap runs first in the container.
const Main = "supervisor"

// Bootstrap is the fixed snippet passed to `python3 -c` (under 1 KiB).
var Bootstrap = mustRead("bootstrap.py")

// Manual is the text of runtime.capability_summary() and of the capabilities resource.
var Manual = strings.TrimRight(mustRead("manual.md"), "\n")

// Files returns the modules of the boot frame, keyed by file name.
func Files() map[string]string {
	out := map[string]string{"manual.md": Manual}
	entries, _ := fsys.ReadDir(".")
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".py") {
			out[e.Name()] = mustRead(e.Name())
		}
	}
	return out
}

func mustRead(name string) string {
	b, err := fsys.ReadFile(name)
	if err != nil {
		panic("entrypoint: " + err.Error()) // embedded at build time; cannot fail
	}
	return string(b)
}
