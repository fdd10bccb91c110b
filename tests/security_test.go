package tests

// Escape-regression suite (SPEC §6.2, §7 LNK-1..6, §8.3, §17 "Container"):
// each test runs an escape attempt through run_python with the production
// container flags and asserts that it fails or stays contained. The code
// that runs in the sandbox reports what happened as one JSON line, and the
// Go side decides, so a failed attempt is never confused with a broken test.

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// hostIPv4 is the first non-loopback, non-link-local IPv4 address of the host.
func hostIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip := n.IP.To4(); ip != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip
			}
		}
	}
	return nil
}

// defaultGateway reads the default route's gateway from /proc/net/route.
func defaultGateway() net.IP {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[1] != "00000000" {
			continue
		}
		gw, err := strconv.ParseUint(fields[2], 16, 32)
		if err != nil || gw == 0 {
			continue
		}
		ip := make(net.IP, 4)
		binary.LittleEndian.PutUint32(ip, uint32(gw))
		return ip
	}
	return nil
}

// TestEscapeNetwork: no network connection of any kind leaves the sandbox
// (--network none): not to listeners of the test process on the host's
// loopback, its non-loopback address or an abstract unix socket, not to the
// default gateway, not to a public address, and no DNS. The host listeners
// must see nothing.
func TestEscapeNetwork(t *testing.T) {
	requirePodman(t)
	var hits atomic.Int64
	var wg sync.WaitGroup
	var closers []func() error
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
		wg.Wait()
	})
	type target struct {
		Name string `json:"name"`
		Kind string `json:"kind"` // tcp, udp, unix
		Host string `json:"host"`
		Port int    `json:"port"`
		Path string `json:"path"`
		// Local: the target is the sandbox's own loopback too, so a UDP
		// send may succeed there; the host listener must still see nothing.
		Local bool `json:"local"`
	}
	var targets []target
	listenTCP := func(name, network, addr string, local bool) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("no %s listener on %s: %v", network, addr, err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				c.Close()
			}
		}()
		closers = append(closers, ln.Close)
		a := ln.Addr().(*net.TCPAddr)
		targets = append(targets, target{Name: name, Kind: "tcp", Host: a.IP.String(), Port: a.Port, Local: local})
	}
	listenUDP := func(name, addr string, local bool) {
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			t.Fatalf("udp listener on %s: %v", addr, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				hits.Add(1)
			}
		}()
		closers = append(closers, pc.Close)
		a := pc.LocalAddr().(*net.UDPAddr)
		targets = append(targets, target{Name: name, Kind: "udp", Host: a.IP.String(), Port: a.Port, Local: local})
	}
	listenTCP("tcp loopback", "tcp4", "127.0.0.1:0", true)
	listenTCP("tcp loopback v6", "tcp6", "[::1]:0", true)
	listenUDP("udp loopback", "127.0.0.1:0", true)
	if ip := hostIPv4(); ip != nil {
		listenTCP("tcp host address", "tcp4", net.JoinHostPort(ip.String(), "0"), false)
		listenUDP("udp host address", net.JoinHostPort(ip.String(), "0"), false)
	} else {
		t.Logf("the host has no non-loopback IPv4 address; that target is left out")
	}
	// An abstract unix socket: reachable from any process in the host's
	// network namespace, so only a separate namespace keeps it out.
	abstract := "bridge-escape-" + secToken(t)
	uln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatalf("abstract unix listener: %v", err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := uln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	closers = append(closers, uln.Close)
	targets = append(targets, target{Name: "abstract unix socket", Kind: "unix", Path: abstract})
	if gw := defaultGateway(); gw != nil {
		targets = append(targets,
			target{Name: "tcp gateway:53", Kind: "tcp", Host: gw.String(), Port: 53},
			target{Name: "tcp gateway:80", Kind: "tcp", Host: gw.String(), Port: 80},
			target{Name: "udp gateway:53", Kind: "udp", Host: gw.String(), Port: 53})
	} else {
		t.Logf("the host has no default gateway; that target is left out")
	}
	targets = append(targets,
		target{Name: "tcp 1.1.1.1:53", Kind: "tcp", Host: "1.1.1.1", Port: 53},
		target{Name: "tcp 8.8.8.8:443", Kind: "tcp", Host: "8.8.8.8", Port: 443},
		target{Name: "udp 1.1.1.1:53", Kind: "udp", Host: "1.1.1.1", Port: 53})
	spec, _ := json.Marshal(targets)

	code := `import json, socket
out = {}
for t in json.loads(` + secPy(string(spec)) + `):
    fam = socket.AF_INET6 if ':' in t['host'] else socket.AF_INET
    try:
        if t['kind'] == 'tcp':
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect((t['host'], t['port']))
            finally:
                s.close()
            out[t['name']] = 'connected'
        elif t['kind'] == 'udp':
            s = socket.socket(fam, socket.SOCK_DGRAM)
            try:
                for _ in range(3):
                    s.sendto(b'bridge-escape', (t['host'], t['port']))
            finally:
                s.close()
            out[t['name']] = 'sent'
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect('\0' + t['path'])
            finally:
                s.close()
            out[t['name']] = 'connected'
    except OSError as e:
        out[t['name']] = 'error %s %s' % (type(e).__name__, e.errno)
try:
    socket.getaddrinfo('example.com', 80)
    out['dns'] = 'resolved'
except OSError as e:
    out['dns'] = 'error %s' % type(e).__name__
out['interfaces'] = [n for _, n in socket.if_nameindex()]
with open('/proc/net/route') as f:
    out['routes'] = len(f.read().splitlines()) - 1
print(json.dumps(out))`
	b := startBridgeLogged(t, nil)
	start := time.Now()
	var got map[string]any
	secResult(t, b, map[string]any{"code": code, "timeout": 30}, &got)
	t.Logf("network probe took %v: %v", time.Since(start).Round(time.Millisecond), got)
	for _, tg := range targets {
		res, _ := got[tg.Name].(string)
		switch {
		case res == "":
			t.Errorf("%s: no result", tg.Name)
		case tg.Kind == "udp" && tg.Local && res == "sent":
			// The sandbox's own loopback took it; the host listener below must not.
		case !strings.HasPrefix(res, "error "):
			t.Errorf("%s (%s:%d%s): %s, want a failure", tg.Name, tg.Host, tg.Port, tg.Path, res)
		}
	}
	if dns, _ := got["dns"].(string); !strings.HasPrefix(dns, "error gaierror") {
		t.Errorf("DNS resolution of example.com: %q, want a gaierror", dns)
	}
	// A pod has an eth0 with one on-link route (its CNI's; docs/SECURITY.md,
	// per-backend table): TestKubeNoNetwork checks it reaches nothing.
	wantIfs, wantRoutes := `["lo"]`, 0.0
	if testRuntime() == "kubernetes" {
		wantIfs, wantRoutes = `["lo","eth0"]`, 1.0
	}
	if ifs, _ := json.Marshal(got["interfaces"]); string(ifs) != wantIfs {
		t.Errorf("network interfaces in the sandbox: %s, want %s", ifs, wantIfs)
	}
	if got["routes"] != wantRoutes {
		t.Errorf("the sandbox has %v routes, want %v", got["routes"], wantRoutes)
	}
	time.Sleep(300 * time.Millisecond) // let a stray packet arrive
	if n := hits.Load(); n != 0 {
		t.Errorf("the host listeners saw %d connections or packets from the sandbox", n)
	}
}

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

// TestEscapeMemoryLimit: growing past MCP_BRIDGE_MEMORY gets the session
// OOM-killed and reported with §8.3's message; only that session is
// restarted, the bridge and the other sessions keep serving.
func TestEscapeMemoryLimit(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, map[string]string{"MCP_BRIDGE_MEMORY": "128m"})
	b.call(map[string]any{"code": "bystander = 'here'", "session": "bystander"})
	b.call(map[string]any{"code": "kept = 1", "session": "hog"})
	start := time.Now()
	r := b.call(map[string]any{"code": "blocks = []\nwhile True:\n    blocks.append(b'\\x01' * (8 << 20))", "session": "hog", "timeout": 60})
	sc := structured(t, r)
	if !cgroupLimits(t) {
		// Rootless cgroup v1: --ulimit data holds the cell (RT-4).
		if sc["status"] != "error" || !strings.Contains(text(t, r), "MemoryError") {
			t.Fatalf("structured = %v, text %q; want a MemoryError in the cell", sc, text(t, r))
		}
		if got := text(t, b.call(map[string]any{"code": "bystander", "session": "bystander"})); got != "'here'" {
			t.Errorf("another session after the MemoryError: %q", got)
		}
		return
	}
	want := "memory limit exceeded (MCP_BRIDGE_MEMORY=128m); the session was restarted"
	if sc["error"] != want || sc["exitCode"] != 137.0 || sc["stateLost"] != true || sc["status"] != "error" {
		t.Fatalf("structured = %v, want error %q, exitCode 137, stateLost", sc, want)
	}
	t.Logf("OOM reported after %v", time.Since(start).Round(time.Millisecond))
	if got := text(t, b.call(map[string]any{"code": "print('kept' in globals())", "session": "hog"})); got != "False" {
		t.Errorf("after the OOM kill: %q, want a fresh session", got)
	}
	if got := text(t, b.call(map[string]any{"code": "bystander", "session": "bystander"})); got != "'here'" {
		t.Errorf("another session after the OOM kill: %q", got)
	}
}

// bridgeContainerIDs lists the full ids of the bridge's containers.
func bridgeContainerIDs(pid int) []string {
	if testRuntime() == "kubernetes" {
		return bridgePodUIDs(pid)
	}
	out, _ := exec.Command(runtimeCLI(), "ps", "-q", "--no-trunc", "--filter", "name=^bridge-"+strconv.Itoa(pid)+"-").Output()
	return strings.Fields(string(out))
}

// processesIn counts the host processes in the PID namespace of each
// container id (cgroups would miss rootless containers on cgroup v1, which
// have none of their own), and all host processes.
func processesIn(ids []string) (map[string]int, int) {
	byNS := map[string]string{}
	for _, id := range ids {
		if ns := containerPIDNS(id); ns != "" {
			byNS[ns] = id
		}
	}
	counts := map[string]int{}
	total := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		total++
		ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid")
		if err != nil {
			continue
		}
		if id, ok := byNS[ns]; ok {
			counts[id]++
		}
	}
	return counts, total
}

var pidNS sync.Map // container id → its PID namespace link, "pid:[inode]"

// containerPIDNS is the PID namespace of a running container, "" if unknown.
func containerPIDNS(id string) string {
	if ns, ok := pidNS.Load(id); ok {
		return ns.(string)
	}
	if testRuntime() == "kubernetes" {
		ns := podPIDNS(id)
		if ns != "" {
			pidNS.Store(id, ns)
		}
		return ns
	}
	out, err := exec.Command(runtimeCLI(), "inspect", "--format", "{{.State.Pid}}", id).Output()
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/" + strings.TrimSpace(string(out)) + "/ns/pid")
	if err != nil {
		return ""
	}
	pidNS.Store(id, ns)
	return ns
}

// TestEscapeForkBomb: a fork bomb is held by the pids limit (production
// default 128): the call ends within its bound, no container ever holds
// more than 128 processes, the next call of the same session works, and
// another session is untouched. Two bombs: the classic loop in the worker
// itself, and a bomb in a child while the cell just sleeps (so the cell
// obeys the interrupt and the session is kept).
func TestEscapeForkBomb(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	b.call(map[string]any{"code": "bystander = 'here'", "session": "bystander"})
	pid := b.cmd.Process.Pid
	bombs := []struct{ name, session, code string }{
		{"classic", "bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"},
		{"in a child", "bomb2", "import os, time\ndef bomb():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\nif os.fork() == 0:\n    bomb()\ntime.sleep(60)"},
	}
	for _, bomb := range bombs {
		b.mustOK("print('warm')") // the default session has its container
		b.call(map[string]any{"code": "print('ready')", "session": bomb.session})
		_, baseline := processesIn(nil)
		done := make(chan struct{})
		var maxIn, maxTotal int
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []string
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if i%5 == 0 {
					ids = bridgeContainerIDs(pid)
				}
				counts, total := processesIn(ids)
				maxTotal = max(maxTotal, total)
				for _, n := range counts {
					maxIn = max(maxIn, n)
				}
			}
		}()
		start := time.Now()
		r := b.call(map[string]any{"code": bomb.code, "session": bomb.session, "timeout": 4})
		elapsed := time.Since(start)
		close(done)
		wg.Wait()
		sc := structured(t, r)
		t.Logf("%s fork bomb: %v, status %v, stateLost %v; at most %d processes in one container; host processes %d before, at most %d during",
			bomb.name, elapsed.Round(time.Millisecond), sc["status"], sc["stateLost"], maxIn, baseline, maxTotal)
		if sc["status"] != "timeout" && sc["status"] != "error" {
			t.Errorf("%s fork bomb result: %v, want a timeout or an error", bomb.name, sc)
		}
		if elapsed > 15*time.Second {
			t.Errorf("%s fork bomb: the call took %v; timeout 4 s + 2 s grace + removal should bound it", bomb.name, elapsed)
		}
		if maxIn < 10 {
			t.Errorf("%s fork bomb: at most %d processes in a container; the measurement did not work", bomb.name, maxIn)
		}
		if maxIn > 128 {
			t.Errorf("%s fork bomb: a container held %d processes; --pids-limit 128 should cap it", bomb.name, maxIn)
		}
		r = b.call(map[string]any{"code": "print('after the bomb')", "session": bomb.session, "timeout": 30})
		if got := text(t, r); !strings.HasPrefix(got, "after the bomb") {
			t.Errorf("%s fork bomb: the next call of the session: %q", bomb.name, got)
		}
		// Whatever still runs is held by the same limit. (When the cell
		// obeys the interrupt, the session is kept, and so are the bomb's
		// processes: reported, not asserted.)
		counts, total := processesIn(bridgeContainerIDs(pid))
		t.Logf("after the %s bomb: processes per container %v, host processes %d", bomb.name, counts, total)
		for id, n := range counts {
			if n > 128 {
				t.Errorf("container %.12s holds %d processes after the bomb", id, n)
			}
		}
	}
	if got := text(t, b.call(map[string]any{"code": "bystander", "session": "bystander", "timeout": 30})); got != "'here'" {
		t.Errorf("another session after the bombs: %q", got)
	}
}

// TestEscapeFillTmpfs: filling /tmp and /workspace ends with ENOSPC at their
// size limits (64m, 128m); the session survives with its state, and the
// space is usable again after a delete.
func TestEscapeFillTmpfs(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	b.mustOK("kept = 'yes'")
	code := `import errno, json, os
out = {}
chunk = b'\1' * (1 << 20)
for d, cap in (('/tmp', 64 << 20), ('/workspace', 128 << 20)):
    p = d + '/fill'
    n, err = 0, None
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while n <= 4 * cap:
            n += os.write(fd, chunk)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        os.close(fd)
    os.unlink(p)
    with open(d + '/after', 'wb') as f:
        f.write(b'x' * 4096)
    os.unlink(d + '/after')
    out[d] = {'bytes': n, 'err': err}
print(json.dumps(out))`
	var got map[string]struct {
		Bytes int64  `json:"bytes"`
		Err   string `json:"err"`
	}
	secResult(t, b, map[string]any{"code": code, "timeout": 60}, &got)
	for d, limit := range map[string]int64{"/tmp": 64 << 20, "/workspace": 128 << 20} {
		g := got[d]
		if g.Err != "ENOSPC" || g.Bytes > limit || g.Bytes < limit-(8<<20) {
			t.Errorf("filling %s: wrote %d bytes, error %q; want ENOSPC after about %d bytes", d, g.Bytes, g.Err, limit)
		}
	}
	if got := b.mustOK("print(kept)"); got != "yes" {
		t.Errorf("the session lost its state: %q", got)
	}
}

// forgeFramesCode writes forged JSON-RPC frames to fd 1, fd 2 and every pipe
// and socket fd of the worker (the link is one of them): call_tool requests for each of servers (tool counter,
// and add_tool for forged_tool), as requests and as notifications.
const forgeFramesCode = `import json, os, stat
def frame(obj):
    return (json.dumps(obj) + '\n').encode()
def pipe_fds():
    fds = {1, 2}
    for name in os.listdir('/proc/self/fd'):
        try:
            mode = os.fstat(int(name)).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                fds.add(int(name))
        except (OSError, ValueError):
            pass
    return sorted(fds)
def forge(servers, tag):
    written = []
    for fd in pipe_fds():
        for srv in servers:
            for i, (tool, args) in enumerate((('counter', {}), ('add_tool', {'name': 'forged_tool'}))):
                for with_id in (True, False):
                    msg = {'jsonrpc': '2.0', 'method': 'call_tool', 'params': {'server': srv, 'tool': tool, 'arguments': args}}
                    if with_id:
                        msg['id'] = 'forged-%s-%d-%s-%d' % (tag, fd, srv, i)
                    try:
                        os.write(fd, frame(msg))
                        written.append(fd)
                    except OSError:
                        pass
    return sorted(set(written))
`

// TestEscapeForgedFrames: user code that writes JSON-RPC frames to fd 1, fd
// 2 and every pipe and socket it holds, or calls the link object directly, cannot
// reach a server outside the call's servers (LNK-3, PXY-7): the forged
// requests of a not-granted server never run, which the server's counter
// and tool list show later through a legitimate call. Forged replies to
// the host's own requests break nothing but, at worst, the forging session.
func TestEscapeForgedFrames(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, withServers(t, map[string]any{"granted": fake(), "secret": fake()}, nil))
	// During a call that grants only "granted".
	code := forgeFramesCode + `import sys, time
written = forge(['secret', 'granted'], 'a')
time.sleep(1)  # the host handles the forged frames while this call is active
try:
    sys.modules['mcp.runtime'].LINK.call('call_tool', {'server': 'secret', 'tool': 'counter', 'arguments': {}})
    link = 'called'
except Exception as e:
    link = '%s: %s' % (type(e).__name__, e)
try:
    await runtime.call_tool('secret', 'add_tool', {'name': 'forged_tool'})
    api = 'called'
except Exception as e:
    api = '%s: %s' % (type(e).__name__, e)
# A thread keeps forging after the call ends, between calls and into the next.
import threading
def later():
    for _ in range(30):
        forge(['secret'], 'b')
        time.sleep(0.1)
threading.Thread(target=later, daemon=True).start()
print(json.dumps({'written': written, 'link': link, 'api': api}))`
	var got struct {
		Written []int  `json:"written"`
		Link    string `json:"link"`
		API     string `json:"api"`
	}
	secResult(t, b, map[string]any{"code": code, "servers": []string{"granted"}, "session": "forge", "timeout": 30}, &got)
	t.Logf("forged frames written to fds %v", got.Written)
	want := "MCPError: Server 'secret' is not available"
	if !strings.HasPrefix(got.Link, want) {
		t.Errorf("LINK.call for a server not granted: %q, want %q", got.Link, want)
	}
	if !strings.HasPrefix(got.API, want) {
		t.Errorf("runtime.call_tool for a server not granted: %q, want %q", got.API, want)
	}
	// The next call of the forging session grants nothing; the thread keeps forging.
	b.call(map[string]any{"code": "import time\ntime.sleep(3)", "session": "forge", "timeout": 30})
	// A legitimate call to "secret" from another session: none of the
	// forged requests ran, so this is the server's first counter call and
	// it never got forged_tool.
	if got := b.mustOK("print(await mcp_secret.counter())", "secret"); got != "1" {
		t.Errorf("secret's counter = %s, want 1: a forged call_tool reached a server outside the call's servers", got)
	}
	if got := b.mustOK("print('forged_tool' in [t['name'] for t in runtime.list_tools_sync('secret')])"); got != "False" {
		t.Errorf("secret has forged_tool: a forged add_tool reached a server outside the call's servers")
	}
	t.Logf("granted's counter after the forged frames: %s", b.mustOK("print(await mcp_granted.counter())", "granted"))

	// Forged replies to the host's requests for the ids a counter would
	// give (0..31), first a well-formed result, then garbage; and a forged
	// ready and output. Exec ids are random, so none of them answers this
	// call or the next one: both end with their real result.
	forgeReplies := forgeFramesCode + `
for fd in pipe_fds():
    for i in range(32):
        for msg in ({'jsonrpc': '2.0', 'id': i, 'result': {'outcome': 'ok', 'exitCode': 0, 'result': "'forged'", 'truncated': False, 'outputBytes': 0, 'reset': False}},
                    {'jsonrpc': '2.0', 'id': i, 'error': {'code': -32000, 'message': 'forged'}},
                    {'jsonrpc': '2.0', 'method': 'ready', 'params': {'python': '2.7.0', 'pid': 1}},
                    {'jsonrpc': '2.0', 'method': 'output', 'params': {'call': i, 'stream': 'stdout', 'data': 'forged output'}}):
            try:
                os.write(fd, frame(msg))
            except OSError:
                pass
print('forger done')`
	for i, garbage := range []string{"", "{'jsonrpc': '2.0', 'id': i, 'result': 5}"} {
		c := forgeReplies
		if garbage != "" {
			c = strings.Replace(c, "for msg in (", "for msg in ("+garbage+", ", 1)
		}
		start := time.Now()
		r := b.call(map[string]any{"code": c, "session": "forge", "timeout": 10})
		sc := structured(t, r)
		delete(sc, "stdout")
		delete(sc, "stderr")
		t.Logf("forged replies (variant %d) after %v: %v", i, time.Since(start).Round(time.Millisecond), sc)
		if time.Since(start) > 20*time.Second {
			t.Errorf("forged replies (variant %d): the call took %v", i, time.Since(start))
		}
		// Its own real reply ends the call: the cell's last line is printed
		// and no forged result is taken.
		if got := text(t, r); !strings.HasSuffix(strings.TrimSpace(got), "forger done") || sc["result"] != nil {
			t.Errorf("forged replies (variant %d) answered the call: result %v, text ends %q", i, sc["result"], tail(got, 200))
		}
		r = b.call(map[string]any{"code": "print('alive')", "session": "forge", "timeout": 30})
		if got := text(t, r); !strings.HasPrefix(got, "alive") {
			t.Errorf("after forged replies (variant %d), the forging session answers %q", i, got)
		}
		t.Logf("next call: %v", structured(t, r))
	}
	if got := b.mustOK("print(await mcp_secret.counter())", "secret"); got != "2" {
		t.Errorf("secret's counter = %s, want 2", got)
	}
}

// TestEscapeOutputFlood: megabytes written straight to fd 1, and junk lines
// (5 MB, and 20 MB over the frame cap) written to every pipe the worker
// holds, do not break the channel: the calls return and the next call works.
func TestEscapeOutputFlood(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	b.mustOK("kept = 'yes'")
	start := time.Now()
	r := b.call(map[string]any{"code": "import os\nn = 0\nwhile n < 5_000_000:\n    n += os.write(1, b'x' * (5_000_000 - n))\nprint('flooded')", "timeout": 30})
	sc := structured(t, r)
	if r.IsError || sc["truncated"] != true {
		t.Errorf("5 MB to fd 1 (%v): isError=%v, truncated=%v", time.Since(start).Round(time.Millisecond), r.IsError, sc["truncated"])
	}
	if n := len(text(t, r)); n > 32768+256 {
		t.Errorf("the flood's text is %d bytes, over the output cap", n)
	}
	// fd-level output is ordered by arrival (OUT-1), so 'flooded' may sit
	// anywhere; the spill file has all of it.
	got := b.mustOK("import glob\np = sorted(glob.glob('/workspace/.bridge/output-*.txt'))[-1]\nd = open(p).read()\nprint(d.count('x') >= 5_000_000, 'flooded' in d)")
	if got != "True True" {
		t.Errorf("the spill file after 5 MB to fd 1: %s", got)
	}
	code := forgeFramesCode + `
for size in (5_000_000, 20_000_000):
    junk = b'y' * size + b'\n'
    for fd in pipe_fds():
        if fd in (1, 2):
            continue
        try:
            view = memoryview(junk)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
print('junk written')`
	start = time.Now()
	if got := text(t, b.call(map[string]any{"code": code, "timeout": 60})); got != "junk written" {
		t.Errorf("junk lines on the frame pipes (%v): %q", time.Since(start).Round(time.Millisecond), got)
	}
	if got := b.mustOK("print(kept)"); got != "yes" {
		t.Errorf("after the floods: %q", got)
	}
	// A junk line without its newline swallows the sandbox's next frame
	// (here the output of print): the session can only hurt itself, the
	// call still ends in time, and the next call works.
	code = forgeFramesCode + `
for fd in pipe_fds():
    if fd not in (1, 2):
        try:
            os.write(fd, b'z' * 1000)
        except OSError:
            pass
print('unterminated')`
	start = time.Now()
	r = b.call(map[string]any{"code": code, "timeout": 2})
	t.Logf("unterminated junk: %v, %q", time.Since(start).Round(time.Millisecond), tail(text(t, r), 200))
	if time.Since(start) > 15*time.Second {
		t.Errorf("the call after an unterminated junk line took %v", time.Since(start))
	}
	if got := text(t, b.run("print('alive')")); !strings.HasPrefix(got, "alive") {
		t.Errorf("after an unterminated junk line: %q", got)
	}
}
