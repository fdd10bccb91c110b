// Package tests holds the end-to-end suites: they build cmd/bridge once and
// drive the binary over stdio with a real MCP client, against real podman
// containers, or Docker Engine with BRIDGE_TEST_RUNTIME=docker; with
// BRIDGE_TEST_RUNTIME=kubernetes each bridge runs as a pod in the cluster and
// the client speaks HTTP to it (kube_incluster_test.go); or the local
// backend with BRIDGE_TEST_RUNTIME=local, for a fast inner loop only. CI runs
// podman, rootless podman, docker and kubernetes, and never skips. With
// BRIDGE_TEST_BIN_DIR the binaries (bridge, fakeserver, fakehttp,
// hostileserver, modernserver) are taken from that directory instead of being built: a
// compiled test binary (go test -c) then runs as another user, without Go.
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
// fakeHTTPBin are the fake MCP servers, hostileBin the scripted one of the
// hostile-upstream suite, modernBin the 2026-07-28-only one.
var bridgeBin, fakeBin, fakeHTTPBin, hostileBin, modernBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bridge-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir := dir
	if prebuilt := os.Getenv("BRIDGE_TEST_BIN_DIR"); prebuilt != "" {
		binDir = prebuilt
	}
	bridgeBin = filepath.Join(binDir, "bridge")
	fakeBin = filepath.Join(binDir, "fakeserver")
	fakeHTTPBin = filepath.Join(binDir, "fakehttp")
	hostileBin = filepath.Join(binDir, "hostileserver")
	modernBin = filepath.Join(binDir, "modernserver")
	for _, b := range [][]string{
		{"-race", "-o", bridgeBin, "../cmd/bridge"},
		{"-o", fakeBin, "./fakeserver"},
		{"-o", fakeHTTPBin, "./fakehttp"},
		{"-o", hostileBin, "./hostileserver"},
		{"-o", modernBin, "./modernserver"},
	} {
		if binDir != dir {
			if _, err := os.Stat(b[len(b)-2]); err != nil {
				fmt.Fprintln(os.Stderr, "BRIDGE_TEST_BIN_DIR:", err)
				os.Exit(1)
			}
			continue
		}
		build := exec.Command("go", append([]string{"build"}, b...)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build:", b, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	closeKube()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
