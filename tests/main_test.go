// Package tests holds the end-to-end suites: they build cmd/bridge once and
// drive the binary over stdio with a real MCP client, against real podman
// containers (or the local backend when BRIDGE_TEST_RUNTIME=local, for a
// fast inner loop only; CI always runs podman and never skips).
package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// bridgeBin is the binary under test, built once by TestMain; fakeBin and
// fakeHTTPBin are the fake MCP servers.
var bridgeBin, fakeBin, fakeHTTPBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bridge-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bridgeBin = filepath.Join(dir, "bridge")
	fakeBin = filepath.Join(dir, "fakeserver")
	fakeHTTPBin = filepath.Join(dir, "fakehttp")
	for _, b := range [][]string{
		{"-race", "-o", bridgeBin, "../cmd/bridge"},
		{"-o", fakeBin, "./fakeserver"},
		{"-o", fakeHTTPBin, "./fakehttp"},
	} {
		build := exec.Command("go", append([]string{"build"}, b...)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build:", b, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
