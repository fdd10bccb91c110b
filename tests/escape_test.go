package tests

// Escape suite of issue 13 (docs/SECURITY.md "Seccomp profile", "User
// namespaces", "Error text"): each test runs the attack from inside
// run_python as uid 65534 with the production flags, the sandbox reports
// what happened as one JSON line, and the Go side decides.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seccompProbe tries every syscall the profile refuses, each in a forked
// child so that one that succeeds (on a runtime's default profile) changes
// nothing in the session, and prints {name: [return value, errno name]}.
// The arguments are harmless where the call is allowed: PTRACE_TRACEME, an
// execveat of a missing file, an empty process_vm_writev.
const seccompProbe = `
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x20000, 0x40000000, 17
CALLS = {  # name: (number, args)
    "unshare": (272, (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET,)),
    "clone": (56, (CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)),
    "clone3": (435, (0, 0)),
    "setns": (308, (0, 0)),
    "mount": (165, (b"tmpfs", b"/tmp", b"tmpfs", 0, 0)),
    "umount2": (166, (b"/tmp", 0)),
    "pivot_root": (155, (b"/", b"/")),
    "open_tree": (428, (-100, b"/tmp", 1)),
    "move_mount": (429, (-1, b"", -100, b"/tmp", 0)),
    "fsopen": (430, (b"tmpfs", 0)),
    "memfd_create": (319, (b"x", 0)),
    "execveat": (322, (-100, b"/nonexistent", 0, 0, 0)),
    "keyctl": (250, (0, -4, 1)),
    "add_key": (248, (b"user", b"k", b"v", 1, -4)),
    "request_key": (249, (b"user", b"k", 0, 0)),
    "bpf": (321, (0, 0, 0)),
    "perf_event_open": (298, (0, 0, -1, -1, 0)),
    "userfaultfd": (323, (0,)),
    "ptrace": (101, (0, 0, 0, 0)),
    "kexec_load": (246, (0, 0, 0, 0)),
    "init_module": (175, (0, 0, b"")),
    "open_by_handle_at": (304, (-100, 0, 0)),
    "process_vm_writev": (311, (os.getpid(), 0, 0, 0, 0, 0)),
    "pidfd_getfd": (438, (0, 0, 0)),
    "sync": (162, ()),
    "syncfs": (306, (os.open("/tmp", os.O_RDONLY),)),
}
def attempt(nr, args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        me = os.getpid()
        ctypes.set_errno(0)
        ret = libc.syscall(nr, *args)
        e = ctypes.get_errno()
        if os.getpid() != me:
            os._exit(0)  # the child of a clone that succeeded
        os.write(w, json.dumps([ret, errno.errorcode.get(e, str(e)) if ret < 0 else ""]).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096)
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)
out = {name: attempt(nr, args) for name, (nr, args) in CALLS.items()}
for fam, name in [(17, "AF_PACKET"), (40, "AF_VSOCK"), (38, "AF_ALG")]:
    try:
        socket.socket(fam, socket.SOCK_DGRAM).close()
        out[name] = [0, ""]
    except OSError as ex:
        out[name] = [-1, errno.errorcode.get(ex.errno, str(ex.errno))]
print(json.dumps(out))
`

// TestEscapeSeccompDenials: every syscall the seccomp profile refuses
// fails from inside run_python with the errno the profile names: EPERM for
// new namespaces, mounts, memfd, keyrings, bpf, ptrace and the rest, ENOSYS
// for clone3 (glibc falls back to clone), and EPERM for AF_PACKET, AF_VSOCK
// and AF_ALG sockets too. Under the runtime's default profile the
// user-namespace unshare, memfd_create and keyctl succeed.
func TestEscapeSeccompDenials(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	var got map[string][2]any
	secResult(t, b, map[string]any{"code": seccompProbe, "timeout": 60}, &got)
	want := map[string]string{"clone3": "ENOSYS"}
	for name := range got {
		if _, ok := want[name]; !ok {
			want[name] = "EPERM"
		}
	}
	if len(got) != 29 {
		t.Errorf("probe reported %d syscalls, want 29: %v", len(got), got)
	}
	for name, w := range want {
		if r, e := got[name][0], got[name][1]; r != float64(-1) || e != w {
			t.Errorf("%s: returned %v (%v), want -1 (%s)", name, r, e, w)
		}
	}
}

// TestEscapeNestedNamespaceAndMemfd replays the issue-13 attacks end to
// end: a user namespace with uid maps for full capabilities, a tmpfs
// mounted in it to run a copied binary despite noexec, an AF_PACKET socket
// in it, and a binary run from a memfd via /proc/self/fd/N. Every step
// fails at its first syscall.
func TestEscapeNestedNamespaceAndMemfd(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	code := `
import ctypes, json, os, shutil, socket, subprocess
libc = ctypes.CDLL(None, use_errno=True)
out = {}
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    res = {}
    try:
        if libc.unshare(0x10000000 | 0x20000 | 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        res["unshare"] = "ok"
        open("/proc/self/setgroups", "w").write("deny")
        open("/proc/self/uid_map", "w").write("0 65534 1")
        open("/proc/self/gid_map", "w").write("0 65534 1")
        res["capeff"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
        os.makedirs("/tmp/m", exist_ok=True)
        if libc.mount(b"tmpfs", b"/tmp/m", b"tmpfs", 0, None) == 0:
            shutil.copy("/bin/true", "/tmp/m/t"); os.chmod("/tmp/m/t", 0o755)
            res["exec_from_tmpfs"] = subprocess.run(["/tmp/m/t"]).returncode
        try:
            socket.socket(17, socket.SOCK_RAW).close(); res["af_packet"] = "created"
        except OSError as ex:
            res["af_packet"] = ex.strerror
    except OSError as ex:
        res["error"] = os.strerror(ex.errno)
    os.write(w, json.dumps(res).encode()); os._exit(0)
os.close(w); os.waitpid(pid, 0)
out["userns"] = json.loads(os.read(r, 65536))
try:
    fd = os.memfd_create("x")
    os.write(fd, open("/bin/true", "rb").read())
    out["memfd_exec"] = subprocess.run(["/proc/self/fd/%d" % fd], pass_fds=[fd]).returncode
except OSError as ex:
    out["memfd_exec"] = ex.strerror
print(json.dumps(out))
`
	var got struct {
		UserNS    map[string]any `json:"userns"`
		MemfdExec any            `json:"memfd_exec"`
	}
	secResult(t, b, map[string]any{"code": code, "timeout": 60}, &got)
	if want := map[string]any{"error": "Operation not permitted"}; fmt.Sprint(got.UserNS) != fmt.Sprint(want) {
		t.Errorf("nested user namespace: %v, want %v", got.UserNS, want)
	}
	if got.MemfdExec != "Operation not permitted" {
		t.Errorf("memfd exec: %v, want Operation not permitted", got.MemfdExec)
	}
}

// TestEscapeDataStackUnderSeccomp: the profile keeps what a data notebook
// needs: numpy, pandas, scipy, scikit-learn fits (with joblib threads),
// matplotlib savefig, subprocess, threads, a multiprocessing Pool and
// Queue, shared memory, asyncio with a subprocess, socketpair and loopback
// TCP (refused in a pod, whose profile refuses AF_INET).
func TestEscapeDataStackUnderSeccomp(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	code := `
import asyncio, json, multiprocessing, os, socket, subprocess, threading
import numpy as np, pandas as pd, scipy.optimize
from sklearn.linear_model import LogisticRegression
from sklearn.ensemble import RandomForestClassifier
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from multiprocessing import shared_memory
out = {}
X = np.random.default_rng(0).normal(size=(200, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
out["logreg"] = bool(LogisticRegression().fit(X, y).score(X, y) > 0.9)
out["forest"] = bool(RandomForestClassifier(n_estimators=10, n_jobs=2).fit(X, y).score(X, y) > 0.9)
df = pd.DataFrame(X, columns=list("abcd")); out["pandas"] = int(df.groupby(df.a > 0).size().sum())
out["scipy"] = round(float(scipy.optimize.minimize_scalar(lambda v: (v - 2) ** 2).x), 3)
fig, ax = plt.subplots(); ax.plot([1, 2, 3]); fig.savefig("/tmp/f.png"); plt.close(fig)
out["savefig"] = os.path.getsize("/tmp/f.png") > 0
out["subprocess"] = subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout.strip()
seen = []; ts = [threading.Thread(target=seen.append, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]; out["threads"] = len(seen)
def square(v): return v * v
with multiprocessing.Pool(2) as p: out["pool"] = sum(p.map(square, range(10)))
q = multiprocessing.Queue(); q.put(7); out["queue"] = q.get(timeout=10)
sm = shared_memory.SharedMemory(create=True, size=16); sm.buf[0] = 9; out["shm"] = sm.buf[0]; sm.close(); sm.unlink()
async def main():
    proc = await asyncio.create_subprocess_exec("true")
    await asyncio.sleep(0.01)
    return await proc.wait()
out["asyncio"] = asyncio.run(main())
a, c = socket.socketpair(); a.send(b"x"); out["socketpair"] = c.recv(1).decode()
try:
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(); socket.create_connection(srv.getsockname()).close()
    out["tcp_loopback"] = True
except OSError as e:
    out["tcp_loopback"] = type(e).__name__
print(json.dumps(out))
`
	var got map[string]any
	secResult(t, b, map[string]any{"code": code, "timeout": 120}, &got)
	want := map[string]any{"logreg": true, "forest": true, "pandas": 200.0, "scipy": 2.0, "savefig": true,
		"subprocess": "hi", "threads": 8.0, "pool": 285.0, "queue": 7.0, "shm": 9.0, "asyncio": 0.0,
		"socketpair": "x", "tcp_loopback": true}
	if testRuntime() == "kubernetes" {
		// A sandbox pod's profile refuses AF_INET sockets, loopback too
		// (docs/SECURITY.md, per-backend table).
		want["tcp_loopback"] = "PermissionError"
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("data stack under the profile:\n got %v\nwant %v", got, want)
	}
}

// sessionIdentity runs code in session and decodes its JSON line.
func sessionIdentity(t *testing.T, b *bridge, session, code string, v any) {
	t.Helper()
	secResult(t, b, map[string]any{"code": code, "session": session, "timeout": 60}, v)
}

// hostUIDProbe prints the uid inside and the host uid it maps to, from the
// range of /proc/self/uid_map that holds it.
const hostUIDProbe = `
import json, os
uid, host = os.getuid(), None
for line in open("/proc/self/uid_map"):
    inside, outside, n = (int(x) for x in line.split())
    if inside <= uid < inside + n:
        host = outside + uid - inside
print(json.dumps({"uid": uid, "host_uid": host}))
`

// TestEscapeSessionsDistinctHostUIDs: uid 65534 inside is never the host's
// own 65534, and two sessions run as two different host uids: on rootful
// podman each session maps a block of the containers range, on rootless
// podman uid 65534 of each session maps to its own id of the user's subuid
// range (docs/SECURITY.md "User namespaces"). Docker has no per-container
// user namespace.
func TestEscapeSessionsDistinctHostUIDs(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	type ident struct {
		UID     int `json:"uid"`
		HostUID int `json:"host_uid"`
	}
	var a, c ident
	sessionIdentity(t, b, "a", hostUIDProbe, &a)
	sessionIdentity(t, b, "b", hostUIDProbe, &c)
	if a.UID != 65534 || c.UID != 65534 {
		t.Errorf("uids inside %d and %d, want 65534", a.UID, c.UID)
	}
	if testRuntime() == "docker" {
		// Docker has no per-container user namespace (docs/SECURITY.md "User
		// namespaces"); what holds there, keyctl refused in every session, is
		// checked by TestEscapeSessionsKeyringAndNproc.
		return
	}
	for _, h := range []int{a.HostUID, c.HostUID} {
		if h == 65534 || h == os.Getuid() || h <= 0 {
			t.Errorf("host uid %d: want neither the host's 65534, nor this user's uid %d", h, os.Getuid())
		}
	}
	if a.HostUID == c.HostUID {
		t.Errorf("both sessions run as host uid %d; want one user namespace per session", a.HostUID)
	}
}

// TestEscapeSessionsKeyringAndNproc: one session's user keyring and process
// count are not another's. On podman (rootful and rootless) the runtime's
// default seccomp profile is used (MCP_BRIDGE_SECCOMP=runtime), because
// the bridge's own already refuses keyctl: this shows the user namespace
// alone separates them. Session a gets its user keyring's serial and forks
// 80 sleeping children; session b must see another user keyring, and must
// still fork with its RLIMIT_NPROC lowered to 40: with a shared host uid,
// a's 80 processes count against b's limit and b's fork fails with EAGAIN.
// Docker shares the uid between sessions; what holds there is the profile
// refusing keyctl in both sessions.
func TestEscapeSessionsKeyringAndNproc(t *testing.T) {
	requirePodman(t)
	separate := testRuntime() == "podman"
	var env map[string]string
	if separate {
		env = map[string]string{"MCP_BRIDGE_SECCOMP": "runtime"}
	}
	b := startBridgeLogged(t, env)
	const keyring = `
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
serial = libc.syscall(250, 0, -4, 1)  # KEYCTL_GET_KEYRING_ID of the user keyring, create
`
	var a struct {
		Serial   int `json:"serial"`
		Children int `json:"children"`
	}
	sessionIdentity(t, b, "a", keyring+`
kids = []
for _ in range(80):
    pid = os.fork()
    if pid == 0:
        import signal
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 65536)
        signal.pause()
        os._exit(0)
    kids.append(pid)
print(json.dumps({"serial": serial, "children": len(kids)}))
`, &a)
	var c struct {
		Serial int    `json:"serial"`
		Fork   string `json:"fork"`
	}
	sessionIdentity(t, b, "b", keyring+`
import resource
resource.setrlimit(resource.RLIMIT_NPROC, (40, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0); fork = "ok"
except OSError as ex:
    fork = ex.strerror
print(json.dumps({"serial": serial, "fork": fork}))
`, &c)
	if a.Children != 80 {
		t.Fatalf("session a forked %d children, want 80", a.Children)
	}
	if !separate {
		if a.Serial != -1 || c.Serial != -1 {
			t.Errorf("docker: keyctl returned %d and %d, want -1 (refused by the profile)", a.Serial, c.Serial)
		}
		return
	}
	if a.Serial <= 0 || c.Serial <= 0 {
		t.Fatalf("keyctl under the runtime's profile failed: %d, %d", a.Serial, c.Serial)
	}
	if a.Serial == c.Serial {
		t.Errorf("both sessions have user keyring %d; want one per session", a.Serial)
	}
	if c.Fork != "ok" {
		t.Errorf("session b's fork with RLIMIT_NPROC 40 while session a has 80 processes: %s, want ok", c.Fork)
	}
}

// TestEscapeUngrantedServerErrors: with servers=[], a broken server's
// start error reaches the sandbox (search warnings, describe_server,
// list_tools, query_tool_docs) without its stderr, which here holds a
// secret, and without host paths; describe_server hides its cwd. A call
// that grants the server still gets the full VAL-3 error with the stderr
// tail.
func TestEscapeUngrantedServerErrors(t *testing.T) {
	requirePodman(t)
	secret := "sk-" + secToken(t)
	cwd := t.TempDir()
	missingCwd := filepath.Join(t.TempDir(), "gone-"+secToken(t))
	b := startBridgeLogged(t, withServers(t, map[string]any{
		// crash-start prints "fakeserver <name>: crash-start: exiting at start" to stderr.
		"broken":  map[string]any{"command": fakeBin, "args": []string{"--mode", "crash-start", "--name", secret}, "cwd": cwd},
		"nocwd":   map[string]any{"command": fakeBin, "cwd": missingCwd},
		"healthy": map[string]any{"command": fakeBin, "cwd": cwd},
	}, nil))
	code := `
import json
out = {"warnings": [], "errors": {}}
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    runtime.search_tool_docs_sync("echo text", limit=3)
out["warnings"] = [str(x.message) for x in w]
for name in ["broken", "nocwd"]:
    for f in ["describe_server", "list_tools"]:
        try:
            getattr(runtime, f + "_sync" if f == "list_tools" else f)(name)
        except Exception as ex:
            out["errors"][name + "." + f] = str(ex)
    try:
        runtime.query_tool_docs_sync(name)
    except Exception as ex:
        out["errors"][name + ".query_tool_docs"] = str(ex)
out["cwd"] = runtime.describe_server("healthy")["cwd"]
print(json.dumps(out))
`
	var got struct {
		Warnings []string          `json:"warnings"`
		Errors   map[string]string `json:"errors"`
		Cwd      string            `json:"cwd"`
	}
	secResult(t, b, map[string]any{"code": code, "servers": []string{}, "timeout": 60}, &got)
	all, _ := json.Marshal(got)
	for _, leak := range []string{secret, cwd, missingCwd, fakeBin, "crash-start"} {
		if strings.Contains(string(all), leak) {
			t.Errorf("the sandbox saw %q:\n%s", leak, all)
		}
	}
	if len(got.Errors) != 6 {
		t.Errorf("got %d errors, want 6 (describe, list and docs of two broken servers): %v", len(got.Errors), got.Errors)
	}
	for k, e := range got.Errors {
		if !strings.Contains(e, "failed to start") || !strings.Contains(e, "withheld") {
			t.Errorf("%s: %q, want a start failure with the details withheld", k, e)
		}
	}
	if want := "Server 'broken' failed to start: exit status 1; last stderr: (withheld: add the server to the servers argument of run_python to see it)"; !strings.Contains(got.Errors["broken.describe_server"], want) {
		t.Errorf("describe_server(broken): %q, want it to contain %q", got.Errors["broken.describe_server"], want)
	}
	var skipped int
	for _, w := range got.Warnings {
		if strings.Contains(w, "search did not cover server") {
			skipped++
		}
	}
	if skipped != 2 {
		t.Errorf("search warnings %q, want two skipped servers", got.Warnings)
	}
	if got.Cwd == "" || strings.Contains(got.Cwd, "/") {
		t.Errorf("describe_server(healthy)['cwd'] = %q for an ungranted server, want it hidden", got.Cwd)
	}

	// Granted: the full VAL-3 error, stderr tail included (the secret is the
	// server's own output, shown to the call that asked for the server).
	r := b.call(map[string]any{"code": "1", "servers": []string{"broken"}, "timeout": 60})
	if got := text(t, r); r.IsError || !strings.Contains(got, "note: server 'broken' failed to start: exit status 1; last stderr: fakeserver "+secret+": crash-start") {
		t.Errorf("granted start failure: %q, want the stderr tail in a note", got)
	}
	if got := b.mustOK("runtime.describe_server('healthy')['cwd']", "healthy"); got != jsonQuoteSingle(cwd) {
		t.Errorf("granted describe_server cwd = %s, want %s", got, jsonQuoteSingle(cwd))
	}
}

// jsonQuoteSingle is the Python repr of a plain path string.
func jsonQuoteSingle(s string) string { return "'" + s + "'" }
