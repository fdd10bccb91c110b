package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tryConnect is Python that prints one line per target: CONNECTED, or the
// error of a 3 s connect (or of the socket it needs).
const tryConnect = `import socket
def tryc(host, port):
    try:
        s = socket.socket(); s.settimeout(3)
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
    try:
        s.connect((host, port)); return "CONNECTED"
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
    finally:
        s.close()
`

// socketProbe is Python that asks the kernel itself (the socket syscall
// through ctypes, so no Python layer can fake it) for a socket of each
// family and prints "family errno" per line: 0 when it got one.
const socketProbe = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, fam in (("AF_UNIX", 1), ("AF_INET", 2), ("AF_INET6", 10)):
    fd = libc.syscall(41 if os.uname().machine == "x86_64" else 198, fam, 1, 0)
    print(name, 0 if fd >= 0 else ctypes.get_errno())
    if fd >= 0:
        os.close(fd)
`

// TestKubeNoNetwork checks that a sandbox pod reaches no network although
// it sits on a routed pod network (it has an IP): its seccomp profile
// refuses AF_INET and AF_INET6 sockets with EPERM, asked of the kernel
// directly, while AF_UNIX works (the check is live), and Python's own
// connects to the node (a listener of this test on every host address,
// which the host reaches), the API server's service address and outside
// all fail.
func TestKubeNoNetwork(t *testing.T) {
	k := requireKubeRuntime(t)
	if os.Getenv("MCP_BRIDGE_K8S_SECCOMP_PROFILE") == "" {
		t.Fatal("MCP_BRIDGE_K8S_SECCOMP_PROFILE is not set: go tool task test:k8s runs the sandboxes with the bridge's Localhost profile")
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	var hostIPs []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			hostIPs = append(hostIPs, ip.IP.String())
			if c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", ip.IP, port), 3*time.Second); err != nil {
				t.Fatalf("the host cannot reach its own listener on %s: %v", ip.IP, err)
			} else {
				c.Close()
			}
		}
	}
	if len(hostIPs) == 0 {
		t.Fatal("the host has no IPv4 address to try")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	pod := b.mustOKIn("a", "import socket; print(socket.gethostname())")
	ip := podIP(t, k, pod)
	t.Logf("sandbox pod %s has IP %s", pod, ip)

	got := b.mustOKIn("a", socketProbe)
	if want := "AF_UNIX 0\nAF_INET 1\nAF_INET6 1"; got != want {
		t.Errorf("socket syscalls in the sandbox pod (family errno):\n%s\nwant (EPERM = 1):\n%s", got, want)
	}

	targets := [][2]any{{"10.0.0.1", 443}, {"8.8.8.8", 53}, {"1.1.1.1", 443}}
	for _, h := range hostIPs {
		targets = append(targets, [2]any{h, port})
	}
	code := tryConnect
	for _, tg := range targets {
		code += fmt.Sprintf("print(%q, tryc(%q, %d))\n", fmt.Sprintf("%s:%d", tg[0], tg[1]), tg[0], tg[1])
	}
	got = b.mustOKIn("b", code)
	t.Logf("from session b:\n%s", got)
	if strings.Contains(got, "CONNECTED") {
		t.Errorf("a sandbox pod reached the network:\n%s", got)
	}
	if n := strings.Count(got, "PermissionError"); n != len(targets) {
		t.Errorf("%d of %d connects were refused a socket (PermissionError), want all:\n%s", n, len(targets), got)
	}
}

// mustOKIn runs code in session and returns its output; it fails on error.
func (b *bridge) mustOKIn(session, code string) string {
	b.t.Helper()
	r := b.call(map[string]any{"code": code, "session": session, "timeout": 60})
	if r.IsError {
		b.t.Fatalf("code failed:\n%s\n--- result:\n%s", code, text(b.t, r))
	}
	return strings.TrimSpace(text(b.t, r))
}

// podIP is the IP of pod name.
func podIP(t *testing.T, k *kube, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pod corev1.Pod
	if err := k.core.Get().Namespace(k.ns).Resource("pods").Name(name).Do(ctx).Into(&pod); err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	if pod.Status.PodIP == "" {
		t.Fatalf("pod %s has no IP", name)
	}
	return pod.Status.PodIP
}
