package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// boxFacts is what the runtime says of one running sandbox container.
type boxFacts struct {
	hostname string
	shares   int // the runtime's record (0: its default)
	memory   int64
	pids     int64
	// The cgroup's own values, where cgroup v1 shows them here ("" else):
	// podman 4's update sets the cgroup without its inspect record.
	v1shares, v1memory, v1pids, v1quota string
}

// sandboxFacts inspects every container of the bridge process pid.
func sandboxFacts(t *testing.T, pid int) []boxFacts {
	t.Helper()
	names := containerNames(fmt.Sprintf("bridge-%d-", pid))
	if len(names) == 0 {
		return nil
	}
	out, err := exec.Command(runtimeCLI(), append([]string{"inspect", "--format",
		"{{.Config.Hostname}} {{.HostConfig.CpuShares}} {{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} {{.State.CgroupPath}}"}, names...)...).Output()
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var facts []boxFacts
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		b := boxFacts{hostname: f[0]}
		b.shares, _ = strconv.Atoi(f[1])
		b.memory, _ = strconv.ParseInt(f[2], 10, 64)
		b.pids, _ = strconv.ParseInt(f[3], 10, 64)
		if len(f) > 4 {
			read := func(ctl, file string) string {
				v, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctl, f[4], file))
				return strings.TrimSpace(string(v))
			}
			b.v1shares, b.v1memory, b.v1pids = read("cpu", "cpu.shares"), read("memory", "memory.limit_in_bytes")+"/"+read("memory", "memory.memsw.limit_in_bytes"), read("pids", "pids.max")
			b.v1quota = read("cpu", "cpu.cfs_quota_us")
		}
		facts = append(facts, b)
	}
	return facts
}

// TestServeCPUWeights: each principal's sandboxes together weigh as much
// as one sandbox of a principal with one session: alice's four sessions
// get a quarter of the full CPU weight each (cgroup v1's 1024 shares), bob's
// single session keeps the full weight. Updating the weight leaves the
// memory, pids and CPU quota limits as they were.
func TestServeCPUWeights(t *testing.T) {
	requirePodman(t)
	if os.Geteuid() != 0 {
		if out, _ := exec.Command(runtimeCLI(), "info", "--format", "{{.Host.CgroupsVersion}}").Output(); strings.TrimSpace(string(out)) == "v1" {
			t.Skip("rootless podman on cgroup v1 has no cgroup to weigh: the bridge sets no weights there (TestWeightArgv)")
		}
	}
	tokens := writeTokens(t, "alice "+aliceToken, "bob "+bobToken)
	// A CPU quota (--cpus) too, which the update must keep.
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens, "MCP_BRIDGE_CPUS": "1.5"})
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)
	host := "import socket; print(socket.gethostname())"
	bobHost := text(t, callHTTP(t, bob, map[string]any{"code": host}))
	aliceHosts := map[string]bool{}
	for round := range 2 { // the second round's calls see all four sessions live
		for i := range 4 {
			h := text(t, callHTTP(t, alice, map[string]any{"code": host, "session": fmt.Sprintf("s%d", i)}))
			if round == 1 {
				aliceHosts[h] = true
			}
		}
	}
	callHTTP(t, bob, map[string]any{"code": "print(1)"})
	if len(aliceHosts) != 4 {
		t.Fatalf("alice's sessions ran in %d containers, want 4", len(aliceHosts))
	}

	pid := s.cmd.Process.Pid
	want := func(h string) int {
		if aliceHosts[h] {
			return 256
		}
		return 1024
	}
	var facts []boxFacts
	deadline := time.Now().Add(20 * time.Second) // weights are set in the background
	for {
		facts = sandboxFacts(t, pid)
		ok, seen := true, 0
		for _, b := range facts {
			if b.hostname != bobHost && !aliceHosts[b.hostname] {
				continue // the spare
			}
			seen++
			got := b.shares
			if b.v1shares != "" {
				got, _ = strconv.Atoi(b.v1shares)
			}
			if got != want(b.hostname) && !(got == 0 && want(b.hostname) == 1024) {
				ok = false
			}
		}
		if ok && seen == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU shares after 20s: %+v; want 256 for alice's %v, 1024 (or the default) for bob's %s", facts, aliceHosts, bobHost)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var bobFacts boxFacts
	for _, b := range facts {
		if b.hostname == bobHost {
			bobFacts = b
		}
	}
	for _, b := range facts {
		if !aliceHosts[b.hostname] {
			continue
		}
		// The update kept the limits bob's untouched container has.
		if b.memory != bobFacts.memory || b.pids != bobFacts.pids || b.memory <= 0 || b.pids <= 0 ||
			b.v1memory != bobFacts.v1memory || b.v1pids != bobFacts.v1pids || b.v1quota != bobFacts.v1quota {
			t.Errorf("alice's container after the weight: %+v; bob's (never updated): %+v", b, bobFacts)
		}
	}
	t.Logf("containers: %+v", facts)
	// Bob's call still runs, and alice's: the weights change no result.
	if got := text(t, callHTTP(t, alice, map[string]any{"code": "print(6*7)", "session": "s0"})); got != "42" {
		t.Errorf("alice's call after the weights: %q", got)
	}
}
