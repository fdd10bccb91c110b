package container

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSeccompProfile checks the built-in profile: an allow-list whose
// default refuses, the escape syscalls of issue 13 refused with EPERM,
// clone only without namespace flags, clone3 ENOSYS (glibc falls back to
// clone), and socket only for unix, inet, inet6 and netlink (pods: unix
// and netlink).
func TestSeccompProfile(t *testing.T) {
	for _, c := range []struct {
		name     string
		profile  []byte
		families []uint64
	}{
		{"containers", SeccompProfile(), []uint64{1, 2, 10, 16}},
		// Pods: no AF_INET or AF_INET6, whatever the CNI.
		{"pods", PodSeccompProfile(), []uint64{1, 16}},
	} {
		t.Run(c.name, func(t *testing.T) { checkSeccompProfile(t, c.profile, c.families) })
	}
	if string(SeccompProfile()) != string(SeccompProfile()) {
		t.Errorf("the profile is not deterministic")
	}
}

// checkSeccompProfile checks one profile allowing socket families.
func checkSeccompProfile(t *testing.T, profile []byte, families []uint64) {
	var p seccompProfile
	if err := json.Unmarshal(profile, &p); err != nil {
		t.Fatalf("profile is not JSON: %v", err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("defaultAction %q, want SCMP_ACT_ERRNO", p.DefaultAction)
	}
	plain := map[string]seccompRule{} // rules without arguments, by name
	var socket, clone []seccompRule
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			switch {
			case n == "socket":
				socket = append(socket, r)
			case n == "clone":
				clone = append(clone, r)
			case len(r.Args) == 0:
				if _, dup := plain[n]; dup {
					t.Errorf("%s has two unconditional rules", n)
				}
				plain[n] = r
			}
		}
	}
	for _, n := range []string{"unshare", "setns", "mount", "umount2", "pivot_root", "move_mount", "open_tree",
		"fsopen", "fsmount", "memfd_create", "execveat", "keyctl", "add_key", "request_key", "bpf",
		"perf_event_open", "userfaultfd", "ptrace", "kexec_load", "kexec_file_load", "init_module",
		"finit_module", "open_by_handle_at", "process_vm_writev", "pidfd_getfd", "sync", "syncfs"} {
		r, ok := plain[n]
		if !ok || r.Action != "SCMP_ACT_ERRNO" || r.ErrnoRet == nil || *r.ErrnoRet != errnoEPERM {
			t.Errorf("%s: rule %+v, want ERRNO(EPERM)", n, r)
		}
	}
	if r := plain["clone3"]; r.Action != "SCMP_ACT_ERRNO" || r.ErrnoRet == nil || *r.ErrnoRet != errnoENOSYS {
		t.Errorf("clone3: rule %+v, want ERRNO(ENOSYS)", r)
	}
	for _, n := range []string{"read", "write", "execve", "fork", "vfork", "futex", "mmap", "wait4", "pipe2",
		"socketpair", "epoll_pwait", "sched_getaffinity", "arch_prctl", "rseq", "getrandom"} {
		if r := plain[n]; r.Action != "SCMP_ACT_ALLOW" {
			t.Errorf("%s: rule %+v, want ALLOW", n, r)
		}
	}
	// Evaluate the clone rules as libseccomp would: (arg & value) == valueTwo.
	cloneAction := func(flags uint64) string {
		actions := map[string]bool{}
		for _, r := range clone {
			if a := r.Args[0]; a.Op != "SCMP_CMP_MASKED_EQ" || len(r.Args) != 1 {
				t.Fatalf("clone rule %+v, want one masked comparison", r)
			} else if flags&a.Value == a.ValueTwo {
				actions[r.Action] = true
			}
		}
		if len(actions) != 1 {
			t.Errorf("clone flags %#x match actions %v, want exactly one", flags, actions)
		}
		for a := range actions {
			return a
		}
		return ""
	}
	const sigchld, cloneVM, cloneThread, cloneNewUser, cloneNewNS, cloneNewNet = 17, 0x100, 0x10000, 0x10000000, 0x20000, 0x40000000
	for _, c := range []struct {
		flags uint64
		want  string
	}{
		{sigchld, "SCMP_ACT_ALLOW"},                          // fork
		{cloneVM | cloneThread | 0x3d0f00, "SCMP_ACT_ALLOW"}, // pthread_create
		{cloneNewUser | sigchld, "SCMP_ACT_ERRNO"},
		{cloneNewNS, "SCMP_ACT_ERRNO"},
		{cloneNewUser | cloneNewNS | cloneNewNet, "SCMP_ACT_ERRNO"},
		{0x02000000, "SCMP_ACT_ERRNO"}, // CLONE_NEWCGROUP
	} {
		if got := cloneAction(c.flags); got != c.want {
			t.Errorf("clone(%#x): %s, want %s", c.flags, got, c.want)
		}
	}
	// Evaluate the socket rules for each family as libseccomp would: the
	// one rule whose argument matches decides.
	family := func(f uint64) string {
		var got []string
		for _, r := range socket {
			a := r.Args[0]
			if (a.Op == "SCMP_CMP_EQ" && f == a.Value) || (a.Op == "SCMP_CMP_GE" && f >= a.Value) {
				got = append(got, r.Action)
			}
		}
		if len(got) != 1 {
			t.Errorf("socket family %d matches %d rules, want 1", f, len(got))
			return ""
		}
		return got[0]
	}
	for f := uint64(0); f < 64; f++ {
		want := "SCMP_ACT_ERRNO"
		if slices.Contains(families, f) {
			want = "SCMP_ACT_ALLOW"
		}
		if got := family(f); got != want {
			t.Errorf("socket family %d: %s, want %s", f, got, want)
		}
	}
	for _, n := range seccompAllowed {
		if _, denied := seccompDenied[n]; denied || n == "clone" || n == "clone3" || n == "socket" {
			t.Errorf("%s is both allowed unconditionally and denied or filtered", n)
		}
	}
}

// TestWriteSeccompProfile checks that the profile lands under
// <state>/.bridge/ with a content-addressed name, readable by the runtime,
// and that a second write returns the same file.
func TestWriteSeccompProfile(t *testing.T) {
	state := t.TempDir()
	path, err := writeSeccompProfile(state)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filepath.Dir(path), filepath.Join(state, ".bridge"); got != want {
		t.Errorf("profile in %s, want %s", got, want)
	}
	if base := filepath.Base(path); !strings.HasPrefix(base, "seccomp-") || !strings.HasSuffix(base, ".json") {
		t.Errorf("profile name %s, want seccomp-<hash>.json", base)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != string(SeccompProfile()) {
		t.Fatalf("profile file content differs (%v)", err)
	}
	st, _ := os.Stat(path)
	if got := st.Mode().Perm(); got != 0o644 {
		t.Errorf("profile mode %v, want 0644", got)
	}
	again, err := writeSeccompProfile(state)
	if err != nil || again != path {
		t.Errorf("second write: %s, %v; want %s", again, err, path)
	}
	left, _ := filepath.Glob(filepath.Join(state, ".bridge", ".seccomp-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestLauncherSeccomp checks the seccomp flag of the launcher's argv for
// each MCP_BRIDGE_SECCOMP setting.
func TestLauncherSeccomp(t *testing.T) {
	custom := filepath.Join(t.TempDir(), "mine.json")
	if err := os.WriteFile(custom, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value string
		want        func(state string) []string
		wantErr     string
	}{
		{"built-in", "", func(state string) []string {
			path, _ := writeSeccompProfile(state)
			return []string{"no-new-privileges", "seccomp=" + path}
		}, ""},
		{"runtime default", "runtime", func(string) []string { return []string{"no-new-privileges"} }, ""},
		{"custom file", custom, func(string) []string { return []string{"no-new-privileges", "seccomp=" + custom} }, ""},
		{"missing file", "/nonexistent/profile.json", nil, "seccomp profile (MCP_BRIDGE_SECCOMP): stat /nonexistent/profile.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			l, _ := testLauncher(t, "docker", func(e *Config) { e.Seccomp, e.StateDir = tt.value, state })
			cmd, err := l.command("s")
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("Command error %v, want %q...", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := flagValues(cmd.argv, "--security-opt"), tt.want(state); !slices.Equal(got, want) {
				t.Errorf("--security-opt values %q, want %q", got, want)
			}
			if got := flagValues(cmd.argv, "--uidmap"); len(got) != 0 {
				t.Errorf("docker argv has --uidmap %q", got)
			}
		})
	}
}
