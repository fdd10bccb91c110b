package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/bridge-mcp/bridge"

// layers are the module's layers, lowest last: a package may import its
// own layer and those its rule lists. Dependencies flow cmd → engine →
// actors → protocol; entrypoint (the sandbox's Python, embedded) imports
// nothing of the bridge. tests/ and the fake servers are outside the rule.
var layers = []struct {
	prefix string
	may    []string
}{
	// actors/childproc runs a child process in its own group: cmd's
	// watchdog and bench use it without the actors themselves.
	{"cmd/", []string{"engine", "protocol", "actors/childproc"}},
	{"engine", []string{"actors", "protocol", "entrypoint"}},
	{"actors", []string{"protocol"}},
	{"protocol", nil},
	{"entrypoint", nil},
}

// TestLayering: no package of the bridge imports a layer above its own
// (cmd/bridge imported actors twice before issue 35 made this a test).
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		rule := layerOf(pkg)
		if rule < 0 {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok || within(dep, layers[rule].prefix) {
				continue
			}
			if !allowed(dep, layers[rule].may) {
				t.Errorf("%s imports %s: %s may import only its own layer and %v", pkg, dep, layers[rule].prefix, layers[rule].may)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d packages; go list gave %q", checked, out)
	}
}

// layerOf is the index in layers of pkg's layer; -1 outside them.
func layerOf(pkg string) int {
	for i, l := range layers {
		if within(pkg, l.prefix) {
			return i
		}
	}
	return -1
}

func allowed(dep string, may []string) bool {
	for _, m := range may {
		if within(dep, m) {
			return true
		}
	}
	return false
}

// within says whether pkg is prefix or under it.
func within(pkg, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}
