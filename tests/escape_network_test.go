package tests

// Escape regressions for the network: no connection of any kind leaves the
// sandbox (the suite's conventions are in security_test.go).

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
	// A pod has an eth0 on its CNI's network, routed on a real cluster
	// (docs/SECURITY.md, per-backend table): its seccomp profile refuses it
	// AF_INET and AF_INET6 sockets, and TestKubeNoNetwork checks that.
	if testRuntime() == "kubernetes" {
		if ifs, _ := json.Marshal(got["interfaces"]); string(ifs) != `["lo","eth0"]` {
			t.Errorf("network interfaces in the sandbox pod: %s, want [\"lo\",\"eth0\"]", ifs)
		}
		for _, tg := range targets {
			if res, _ := got[tg.Name].(string); tg.Kind != "unix" && !strings.HasPrefix(res, "error PermissionError 1") {
				t.Errorf("%s: %s, want the socket refused (PermissionError, EPERM)", tg.Name, res)
			}
		}
	} else {
		if ifs, _ := json.Marshal(got["interfaces"]); string(ifs) != `["lo"]` {
			t.Errorf("network interfaces in the sandbox: %s, want [\"lo\"]", ifs)
		}
		if got["routes"] != 0.0 {
			t.Errorf("the sandbox has %v routes, want none", got["routes"])
		}
	}
	time.Sleep(300 * time.Millisecond) // let a stray packet arrive
	if n := hits.Load(); n != 0 {
		t.Errorf("the host listeners saw %d connections or packets from the sandbox", n)
	}
}
