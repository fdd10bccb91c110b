package tests

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// conformanceScenarios are the official MCP conformance suite's generic
// server scenarios that bridge serve must pass (the suite sends no token,
// so the bridge runs with --insecure-no-auth on loopback).
var conformanceScenarios = []string{
	"server-initialize", "ping", "tools-list", "dns-rebinding-protection", "server-sse-multiple-streams",
}

var conformancePassed = regexp.MustCompile(`Passed: ([0-9]+)/([0-9]+), 0 failed`)

// TestServeConformance runs the official conformance suite
// ($BRIDGE_TEST_CONFORMANCE, installed by `go tool task setup:conformance`)
// against bridge serve. It fails, never skips, when the suite is missing.
func TestServeConformance(t *testing.T) {
	bin := os.Getenv("BRIDGE_TEST_CONFORMANCE")
	if bin == "" {
		t.Fatal("BRIDGE_TEST_CONFORMANCE is not set: run `go tool task setup:conformance` and the tests through the Taskfile, " +
			"or set it to the conformance binary")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("BRIDGE_TEST_CONFORMANCE: %v (run `go tool task setup:conformance`)", err)
	}
	s := startServe(t, nil, "--insecure-no-auth")
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "server", "--url", s.base+"/mcp", "--scenario", sc)
			out, err := cmd.CombinedOutput()
			m := conformancePassed.FindSubmatch(out)
			if err != nil || m == nil || string(m[1]) != string(m[2]) || string(m[1]) == "0" {
				t.Fatalf("conformance %s: %v\n%s", sc, err, tail(string(out), 4000))
			}
		})
	}
}
