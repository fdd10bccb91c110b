package tests

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tryConnect is Python that prints one line per target: CONNECTED, or the
// error of a 3 s connect.
const tryConnect = `import socket
def tryc(host, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); return "CONNECTED"
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
    finally:
        s.close()
`

// TestKubeNoNetwork checks that a sandbox pod reaches no network: not another
// sandbox pod (one listening, which its own pod reaches), not the node (a
// listener of this test on every host address, which the host reaches), not
// the API server's service address, nothing outside; and that it has no
// default route.
func TestKubeNoNetwork(t *testing.T) {
	k := requireKubeRuntime(t)
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
	listen := `import socket, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 8000)); srv.listen(8)
def serve():
    while True:
        c, _ = srv.accept(); c.close()
threading.Thread(target=serve, daemon=True).start()
print(socket.gethostname())`
	r := b.call(map[string]any{"code": listen, "session": "a", "timeout": 60})
	if r.IsError {
		t.Fatalf("listener: %s", text(t, r))
	}
	podA := strings.TrimSpace(text(t, r))
	ipA := podIP(t, k, podA)
	if got := b.mustOKIn("a", tryConnect+fmt.Sprintf("print(tryc(%q, 8000))", ipA)); got != "CONNECTED" {
		t.Fatalf("pod %s cannot reach its own listener on %s: %s", podA, ipA, got)
	}
	targets := [][2]any{{ipA, 8000}, {"10.0.0.1", 443}, {"8.8.8.8", 53}, {"1.1.1.1", 443}}
	for _, ip := range hostIPs {
		targets = append(targets, [2]any{ip, port})
	}
	code := tryConnect
	for _, tg := range targets {
		code += fmt.Sprintf("print(%q, tryc(%q, %d))\n", fmt.Sprintf("%s:%d", tg[0], tg[1]), tg[0], tg[1])
	}
	code += `routes = open("/proc/net/route").read().split("\n")[1:]
print("default route:", any(l.split()[1] == "00000000" for l in routes if l.strip()))`
	got := b.mustOKIn("b", code)
	t.Logf("from session b:\n%s", got)
	if strings.Contains(got, "CONNECTED") {
		t.Errorf("a sandbox pod reached the network:\n%s", got)
	}
	if !strings.Contains(got, "default route: False") {
		t.Errorf("a sandbox pod has a default route:\n%s", got)
	}
	if n := strings.Count(got, "\n") + 1; n != len(targets)+1 {
		t.Errorf("got %d lines, want %d:\n%s", n, len(targets)+1, got)
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
