package tests

// Escape-regression suite (SPEC §6.2, §7 LNK-1..6, §8.3, §17 "Container"):
// each test runs an escape attempt through run_python with the production
// container flags and asserts that it fails or stays contained. The code
// that runs in the sandbox reports what happened as one JSON line, and the
// Go side decides, so a failed attempt is never confused with a broken test.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// secResult runs args, requires a successful result, and decodes the last
// stdout line (the sandbox code prints one JSON object last) into v.
func secResult(t *testing.T, b *bridge, args map[string]any, v any) {
	t.Helper()
	r := b.call(args)
	if r.IsError {
		t.Fatalf("probe failed:\n%s", text(t, r))
	}
	lines, _ := structured(t, r)["stdout"].([]any)
	if len(lines) == 0 {
		t.Fatalf("probe printed nothing: %s", text(t, r))
	}
	last, _ := lines[len(lines)-1].(string)
	if err := json.Unmarshal([]byte(last), v); err != nil {
		t.Fatalf("probe output %q: %v", last, err)
	}
}

// startBridgeLogged is startBridge; when the test fails it also logs the
// bridge's last log lines about sandboxes and containers, which the
// harness's stderr tail may not reach.
func startBridgeLogged(t *testing.T, env map[string]string) *bridge {
	t.Helper()
	var b *bridge
	t.Cleanup(func() {
		if !t.Failed() || b == nil {
			return
		}
		var keep []string
		for _, line := range strings.Split(b.stderr.String(), "\n") {
			if strings.Contains(line, "spare") || strings.Contains(line, "container") || strings.Contains(line, "remov") {
				keep = append(keep, line)
			}
		}
		t.Logf("bridge log lines about containers:\n%s", strings.Join(keep[max(0, len(keep)-60):], "\n"))
	})
	b = startBridge(t, env)
	return b
}

// secToken is a random hex string for secrets and markers.
func secToken(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// secPy quotes s as a Python string literal (JSON strings are valid Python).
func secPy(s string) string { return jsonQuote(s) }

// TestEscapeFilesystemWrites: the root file system is read-only (even where
// the permissions would allow a write), while /tmp and /workspace are
// writable tmpfs mounts with noexec, nosuid, nodev and the §6.2 sizes.
func TestEscapeFilesystemWrites(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	code := `import errno, json, os
out = {'denied': {}, 'ok': {}, 'mounts': {}}
def attempt(name, fn):
    try:
        fn()
        out['denied'][name] = 'succeeded'
    except OSError as e:
        out['denied'][name] = errno.errorcode.get(e.errno, str(e.errno))
def write(p):
    with open(p, 'w') as f:
        f.write('escape')
for p in ['/etc/x', '/usr/x', '/x', '/home/x', '/root/x', '/var/x', '/var/tmp/x', '/opt/x', '/usr/bin/x',
          '/usr/lib/x', '/run/x', '/srv/x', '/mnt/x', '/sys/x', '/sys/fs/cgroup/x']:
    attempt('write ' + p, lambda p=p: write(p))
attempt('mkdir /newdir', lambda: os.mkdir('/newdir'))
attempt('append /etc/passwd', lambda: open('/etc/passwd', 'a').write('evil::0:0::/:/bin/sh\n'))
attempt('chmod /etc/passwd', lambda: os.chmod('/etc/passwd', 0o666))
attempt('symlink /etc/evil', lambda: os.symlink('/tmp', '/etc/evil'))
attempt('rename /etc/hostname', lambda: os.rename('/etc/hostname', '/etc/hostname2'))
for d in ['/tmp', '/workspace']:
    p = d + '/probe.txt'
    write(p)
    os.makedirs(d + '/sub/dir', exist_ok=True)
    with open(p) as f:
        out['ok'][d] = f.read() == 'escape' and os.path.isdir(d + '/sub/dir')
    os.unlink(p)
st = os.stat('/var/tmp')
out['varTmpWorldWritable'] = bool(st.st_mode & 0o002)
with open('/proc/self/mountinfo') as f:
    for line in f:
        fields = line.split()
        sep = fields.index('-')
        if fields[4] in ('/', '/tmp', '/workspace'):
            out['mounts'][fields[4]] = {'opts': fields[5], 'fstype': fields[sep + 1], 'super': fields[sep + 3]}
print(json.dumps(out))`
	var got struct {
		Denied              map[string]string `json:"denied"`
		OK                  map[string]bool   `json:"ok"`
		VarTmpWorldWritable bool              `json:"varTmpWorldWritable"`
		Mounts              map[string]struct {
			Opts, Fstype, Super string
		} `json:"mounts"`
	}
	secResult(t, b, map[string]any{"code": code, "timeout": 30}, &got)
	if len(got.Denied) < 20 {
		t.Fatalf("only %d write attempts reported: %v", len(got.Denied), got.Denied)
	}
	for what, res := range got.Denied {
		if res != "EROFS" && res != "EACCES" && res != "EPERM" {
			t.Errorf("%s: %s, want EROFS, EACCES or EPERM", what, res)
		}
	}
	// /var/tmp is world-writable in the image: only the read-only root stops the write.
	if got.VarTmpWorldWritable && got.Denied["write /var/tmp/x"] != "EROFS" {
		t.Errorf("write /var/tmp/x (mode 1777): %s, want EROFS (read-only root)", got.Denied["write /var/tmp/x"])
	}
	for _, d := range []string{"/tmp", "/workspace"} {
		if !got.OK[d] {
			t.Errorf("writing in %s failed", d)
		}
	}
	root := got.Mounts["/"]
	if !strings.HasPrefix(root.Opts, "ro") {
		t.Errorf("/ is mounted %q, want read-only", root.Opts)
	}
	for d, size := range map[string]string{"/tmp": "size=65536k", "/workspace": "size=131072k"} {
		m := got.Mounts[d]
		opts := "," + m.Opts + ","
		if m.Fstype != "tmpfs" || !strings.Contains(","+m.Super+",", ","+size+",") {
			t.Errorf("%s: fstype %q, options %q, want tmpfs with %s", d, m.Fstype, m.Super, size)
		}
		want := []string{"rw", "noexec", "nosuid", "nodev"}
		if testRuntime() == "kubernetes" {
			want = want[:1] // an emptyDir takes no mount options (docs/SECURITY.md, per-backend table)
		}
		for _, o := range want {
			if !strings.Contains(opts, ","+o+",") {
				t.Errorf("%s is mounted %q, want %s", d, m.Opts, o)
			}
		}
	}
}

// TestEscapeNoexec: a file written to /tmp, /workspace or /dev/shm cannot be
// executed, whether a script or a copy of a binary, nor mapped executable
// (mmap, dlopen, the dynamic loader trick), while binaries of the image run.
func TestEscapeNoexec(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	code := `import errno, glob, json, mmap, os, shutil, subprocess, ctypes, _ctypes
out = {'baseline': subprocess.run(['/bin/true']).returncode, 'exec': {}, 'mmap': {}, 'dlopen': {}, 'ldso': {}}
ld = sorted(glob.glob('/lib64/ld-linux*.so*') + glob.glob('/lib/*/ld-linux*.so*'))
for d in ['/tmp', '/workspace', '/dev/shm']:
    script = d + '/run.sh'
    with open(script, 'w') as f:
        f.write('#!/bin/sh\necho pwned\n')
    os.chmod(script, 0o755)
    binary = d + '/true'
    shutil.copy('/bin/true', binary)
    os.chmod(binary, 0o755)
    for p in (script, binary):
        try:
            r = subprocess.run([p], capture_output=True)
            out['exec'][p] = 'ran %d' % r.returncode
        except OSError as e:
            out['exec'][p] = errno.errorcode.get(e.errno, str(e.errno))
    with open(binary, 'rb') as f:
        try:
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC).close()
            out['mmap'][d] = 'mapped'
        except OSError as e:
            out['mmap'][d] = errno.errorcode.get(e.errno, str(e.errno))
    lib = d + '/lib.so'
    shutil.copy(_ctypes.__file__, lib)
    try:
        ctypes.CDLL(lib)
        out['dlopen'][d] = 'loaded'
    except OSError as e:
        out['dlopen'][d] = 'failed'
    if ld:
        r = subprocess.run([ld[0], binary], capture_output=True)
        out['ldso'][d] = r.returncode
    for p in (script, binary, lib):
        os.unlink(p)
print(json.dumps(out))`
	var got struct {
		Baseline int               `json:"baseline"`
		Exec     map[string]string `json:"exec"`
		Mmap     map[string]string `json:"mmap"`
		Dlopen   map[string]string `json:"dlopen"`
		Ldso     map[string]int    `json:"ldso"`
	}
	secResult(t, b, map[string]any{"code": code, "timeout": 30}, &got)
	if got.Baseline != 0 {
		t.Fatalf("/bin/true from the image exited %d; exec itself is broken", got.Baseline)
	}
	for _, d := range []string{"/tmp", "/workspace", "/dev/shm"} {
		for _, f := range []string{"/run.sh", "/true"} {
			if res := got.Exec[d+f]; res != "EACCES" {
				t.Errorf("exec %s%s: %q, want EACCES (PermissionError)", d, f, res)
			}
		}
		if res := got.Mmap[d]; res != "EPERM" {
			t.Errorf("mmap PROT_EXEC of a file in %s: %q, want EPERM", d, res)
		}
		if res := got.Dlopen[d]; res != "failed" {
			t.Errorf("dlopen of a library copied to %s: %q, want failed", d, res)
		}
		if rc, ok := got.Ldso[d]; ok && rc == 0 {
			t.Errorf("ld.so ran the binary copied to %s", d)
		}
	}
}

// TestEscapeHostSecrets: nothing of the host reaches the sandbox: not a
// secret from a server's config env, not a variable of the bridge's own
// environment, not a file in the state dir (the catalog cache and a marker),
// and not the host paths of HOME, the config dir or the state dir. The whole
// file system (but /proc and /sys) is searched, plus every process's
// environment and command line.
func TestEscapeHostSecrets(t *testing.T) {
	requirePodman(t)
	tok := secToken(t)
	secret := "sk-secret-" + tok
	bridgeSecret := "bridge-env-secret-" + tok
	markerName := "bridge-marker-" + tok
	markerBody := "marker-body-" + tok
	home := t.TempDir()
	state := filepath.Join(home, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, markerName), []byte(markerBody+"\n"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := withServers(t, map[string]any{
		"s": map[string]any{"command": fakeBin, "env": map[string]string{"API_TOKEN": secret}},
	}, map[string]string{"HOME": home, "MCP_BRIDGE_STATE_DIR": state, "BRIDGE_TEST_SECRET": bridgeSecret})
	b := startBridgeLogged(t, env)
	// Start the server (its env holds the secret) and fill the catalog
	// cache, from another session.
	if got := b.mustOK("await mcp_s.add(1, 2)", "s"); got != "{'sum': 3}" {
		t.Fatalf("server s: %s", got)
	}
	if got := b.mustOK("(await mcp_s.env('API_TOKEN')) == "+secPy(secret), "s"); got != "True" {
		t.Fatalf("the server did not get its env: %s", got)
	}
	needles := map[string]string{
		"config secret": secret, "bridge env secret": bridgeSecret, "state marker name": markerName,
		"state marker body": markerBody, "host HOME": home, "host state dir": state, "host config dir": env["MCP_BRIDGE_CONFIG_DIR"],
	}
	hexNeedles := map[string]string{}
	for k, v := range needles {
		hexNeedles[k] = hex.EncodeToString([]byte(v))
	}
	spec, _ := json.Marshal(hexNeedles)
	// The needles travel hex-encoded, so the code text itself holds none.
	code := `import json, os, stat
needles = {k: bytes.fromhex(v) for k, v in json.loads(` + secPy(string(spec)) + `).items()}
found = []
files = 0
def scan(where, data):
    for k, n in needles.items():
        if n in data:
            found.append('%s in %s' % (k, where))
for root, dirs, names in os.walk('/'):
    if root == '/':
        dirs[:] = [d for d in dirs if d not in ('proc', 'sys')]
    for name in names + dirs:
        scan('the path ' + os.path.join(root, name), os.fsencode(os.path.join(root, name)))
    for name in names:
        p = os.path.join(root, name)
        try:
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
                continue
            with open(p, 'rb') as f:
                data = f.read()
        except OSError:
            continue
        files += 1
        scan(p, data)
scan('os.environ', repr(dict(os.environ)).encode())
procs = 0
for pid in os.listdir('/proc'):
    if pid.isdigit():
        procs += 1
        for what in ('environ', 'cmdline'):
            try:
                with open('/proc/%s/%s' % (pid, what), 'rb') as f:
                    scan('/proc/%s/%s' % (pid, what), f.read())
            except OSError:
                pass
exists = [k for k in ('host HOME', 'host state dir', 'host config dir') if os.path.exists(needles[k])]
print(json.dumps({'files': files, 'procs': procs, 'found': found, 'exists': exists}))`
	var got struct {
		Files  int      `json:"files"`
		Procs  int      `json:"procs"`
		Found  []string `json:"found"`
		Exists []string `json:"exists"`
	}
	start := time.Now()
	secResult(t, b, map[string]any{"code": code, "session": "probe", "timeout": 90}, &got)
	t.Logf("searched %d files and %d processes in %v", got.Files, got.Procs, time.Since(start).Round(time.Millisecond))
	if got.Files < 1000 || got.Procs < 2 {
		t.Fatalf("the search saw only %d files and %d processes; it did not run", got.Files, got.Procs)
	}
	for _, f := range got.Found {
		t.Errorf("host data visible in the sandbox: %s", f)
	}
	for _, p := range got.Exists {
		t.Errorf("the %s path exists inside the sandbox", p)
	}
}

// TestEscapePrivileges: the sandbox user has no capabilities in any set,
// no_new_privs is set, it runs as 65534:65534, and the privileged calls
// that would follow from a capability fail.
func TestEscapePrivileges(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	code := `import errno, json, os, socket, subprocess
def status(text):
    return {k: v.strip() for k, v in (l.split(':', 1) for l in text.splitlines() if ':' in l)}
me = status(open('/proc/self/status').read())
child = status(subprocess.run(['cat', '/proc/self/status'], capture_output=True, text=True).stdout)
out = {'self': {k: me[k] for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Uid', 'Gid')},
       'child': {k: child[k] for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Uid', 'Gid')},
       'ids': [os.getuid(), os.geteuid(), os.getgid(), os.getegid()], 'groups': os.getgroups(), 'denied': {}}
def attempt(name, fn):
    try:
        fn()
        out['denied'][name] = 'succeeded'
    except OSError as e:
        out['denied'][name] = errno.errorcode.get(e.errno, str(e.errno))
attempt('setuid(0)', lambda: os.setuid(0))
attempt('setgid(0)', lambda: os.setgid(0))
attempt('chroot', lambda: os.chroot('/tmp'))
attempt('raw socket', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt('packet socket', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close())
attempt('mknod', lambda: os.mknod('/tmp/dev', 0o600 | 0o020000, os.makedev(1, 3)))
print(json.dumps(out))`
	var got struct {
		Self, Child map[string]string
		IDs         []int             `json:"ids"`
		Groups      []int             `json:"groups"`
		Denied      map[string]string `json:"denied"`
	}
	secResult(t, b, map[string]any{"code": code, "timeout": 30}, &got)
	for who, st := range map[string]map[string]string{"sandbox": got.Self, "subprocess": got.Child} {
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if st[k] != "0000000000000000" {
				t.Errorf("%s %s = %q, want 0000000000000000", who, k, st[k])
			}
		}
		if st["NoNewPrivs"] != "1" {
			t.Errorf("%s NoNewPrivs = %q, want 1", who, st["NoNewPrivs"])
		}
		for _, k := range []string{"Uid", "Gid"} {
			if f := strings.Fields(st[k]); len(f) != 4 || strings.Join(f, " ") != "65534 65534 65534 65534" {
				t.Errorf("%s %s = %q, want 65534 for real, effective, saved and fs ids", who, k, st[k])
			}
		}
	}
	if fmt.Sprint(got.IDs) != "[65534 65534 65534 65534]" {
		t.Errorf("uid, euid, gid, egid = %v, want all 65534", got.IDs)
	}
	for _, g := range got.Groups {
		if g != 65534 {
			t.Errorf("supplementary groups %v, want none but 65534", got.Groups)
			break
		}
	}
	for what, res := range got.Denied {
		if res != "EPERM" && res != "EACCES" {
			t.Errorf("%s: %s, want EPERM or EACCES", what, res)
		}
	}
}
