package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	bkube "github.com/bridge-mcp/bridge/engine/kube"
)

// Failover targets (issue: "Losing a replica loses no session"), from the
// leader's end to the first successful call through the Service. The
// SIGKILL one waits out the Lease (bkube.DefaultElectionTimes).
const (
	gracefulFailover = 10 * time.Second
	killFailover     = 15*time.Second + 10*time.Second
)

// TestKubeFailover runs the manifests of `bridge kubernetes manifests
// --replicas 2` as shipped: one replica holds the Lease bridge-leader and is
// Ready, the other stands by (/readyz "standby", bridge_leader 0, /mcp
// refused), and bridge doctor names the leader. A session's state, set
// through the Service's cluster IP, is found again through it after each
// way a leader goes: its pod deleted (SIGTERM, the Lease released), its
// bridge process SIGKILLed (the Lease expires), and its pod evicted
// through the Eviction API, which a PodDisruptionBudget of minAvailable 1
// would refuse forever (the manifests ship none). The old leader's sandbox
// pods go. Last, the leader is cut off from the API server: it fences
// itself before the standby leads. A node drain needs a second node: this
// single-node cluster cannot show one.
func TestKubeFailover(t *testing.T) {
	k := requireKubeRuntime(t)
	ns := fmt.Sprintf("bridge-ha-%d", time.Now().UnixNano()%1_000_000)
	client := manifestClient(t, k, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	class := statePV(ctx, t, client, ns)
	alice, scraper := deploy(ctx, t, client, ns, "--replicas", "2", "--storage-class", class, "--storage-size", "1Gi")
	svc := serviceURL(ctx, t, client, ns)
	h := &haDeployment{t: t, k: k, client: client, ns: ns, svc: svc, alice: alice}

	leader, standby := h.waitPair(ctx, "")
	if code, body := h.get(ctx, standby, "/readyz", ""); code != http.StatusServiceUnavailable || body != "standby\n" {
		t.Errorf("the standby's /readyz: %d %q, want 503 \"standby\"", code, body)
	}
	if code, body := h.post(ctx, standby, "/mcp", alice); code != http.StatusServiceUnavailable || !strings.Contains(body, "this bridge replica is the standby") {
		t.Errorf("the standby's /mcp: %d %s, want 503 naming the standby", code, body)
	}
	for pod, want := range map[*corev1.Pod]string{leader: "bridge_leader 1", standby: "bridge_leader 0"} {
		if _, body := h.get(ctx, pod, "/metrics", scraper); !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("/metrics of %s has no line %q", pod.Name, want)
		}
	}
	doctor := execInPod(ctx, t, k, ns, leader.Name, "bridge", "doctor")
	if want := "OK   leader: pod " + leader.Name + " holds the Lease bridge-leader"; !strings.Contains(doctor, want) {
		t.Errorf("bridge doctor in the leader has no line %q:\n%s", want, doctor)
	}

	h.run(ctx, "x = 41")
	sessionPod := h.run(ctx, "import socket; print(socket.gethostname())")

	// 1. A graceful stop: the pod deleted, its bridge drains, writes its
	// snapshots, and releases the Lease.
	start := time.Now()
	mustAPI(t, client.Delete().AbsPath("/api/v1/namespaces", ns, "pods", leader.Name).Do(ctx))
	took, pod := h.firstCall(ctx, start, sessionPod, "print(x + 1)", "42", 90*time.Second)
	t.Logf("graceful failover (pod deleted → first call through the Service that restored the session): %v", took.Round(100*time.Millisecond))
	if took > gracefulFailover {
		t.Errorf("graceful failover took %v, want at most %v", took.Round(100*time.Millisecond), gracefulFailover)
	}
	waitGone(ctx, t, k, ns, bkube.LabelSandbox+"=true", sessionPod, 60*time.Second)
	sessionPod = pod

	// 2. The leader's process killed: the standby waits out the Lease.
	leader, _ = h.waitPair(ctx, leader.Name)
	// A cell's snapshot is uploaded after its result, in the background, so
	// a SIGKILL right after a call may lose it: this one waits for its own.
	h.run(ctx, "x = 42; runtime.snapshot()")
	pid := podProcess(t, string(leader.UID), 10*time.Second, func(args []string) bool { return len(args) > 1 && args[1] == "serve" })
	start = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took, pod = h.firstCall(ctx, start, sessionPod, "print(x + 1)", "43", 2*time.Minute)
	t.Logf("failover after SIGKILL (process killed → first call through the Service that restored the session): %v", took.Round(100*time.Millisecond))
	if took > killFailover {
		t.Errorf("failover after SIGKILL took %v, want at most %v", took.Round(100*time.Millisecond), killFailover)
	}
	// The killed leader's sandbox pod goes, with its attach or, at the
	// latest, in the new leader's sweep.
	waitGone(ctx, t, k, ns, bkube.LabelSandbox+"=true", sessionPod, bkube.SweptWithin+10*time.Second)
	sessionPod = pod

	// 3. The leader evicted. A budget of minAvailable 1 counts the standby as
	// unavailable and refuses the leader's eviction (as it would every
	// drain); without one the eviction goes through.
	leader, _ = h.waitPair(ctx, "")
	h.run(ctx, "x = 43")
	pdb := map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "min-one"},
		"spec": map[string]any{"minAvailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow",
			"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "bridge"}}}}
	mustAPI(t, client.Post().AbsPath("/apis/policy/v1/namespaces", ns, "poddisruptionbudgets").Body(mustJSON(t, pdb)).
		SetHeader("Content-Type", "application/json").Do(ctx))
	if code := h.evict(ctx, leader.Name, 30*time.Second); code != http.StatusTooManyRequests {
		t.Errorf("eviction of the leader under minAvailable 1: %d, want 429", code)
	}
	mustAPI(t, client.Delete().AbsPath("/apis/policy/v1/namespaces", ns, "poddisruptionbudgets", "min-one").Do(ctx))
	start = time.Now()
	if code := h.evict(ctx, leader.Name, 0); code != http.StatusCreated {
		t.Fatalf("eviction of the leader without a budget: %d, want 201", code)
	}
	took, pod = h.firstCall(ctx, start, sessionPod, "print(x + 1)", "44", 90*time.Second)
	t.Logf("failover after an eviction: %v", took.Round(100*time.Millisecond))
	if took > gracefulFailover {
		t.Errorf("failover after an eviction took %v, want at most %v", took.Round(100*time.Millisecond), gracefulFailover)
	}
	sessionPod = pod

	// 4. The leader cut off from the API server (its packets to it dropped on
	// the host, where the API server listens): it cannot renew, so it fences
	// itself (/readyz and /mcp 503, no more snapshots) and exits before the
	// standby may take the Lease, which it then does.
	leader, standby = h.waitPair(ctx, "")
	h.run(ctx, "x = 50; runtime.snapshot()")
	rule := []string{"INPUT", "-s", leader.Status.PodIP, "-p", "tcp", "--dport", "6443", "-j", "DROP"}
	iptables(t, append([]string{"-I"}, rule...)...)
	cut := true
	uncut := func() {
		if cut {
			iptables(t, append([]string{"-D"}, rule...)...)
			cut = false
		}
	}
	defer uncut()
	start = time.Now()
	var fenced, led time.Duration
	for fenced == 0 || led == 0 {
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("after 2 minutes cut off: the leader fenced after %v, the standby led after %v (0: not yet)\n%s", fenced, led, h.logs())
		}
		if code, _ := h.get(ctx, leader, "/readyz", ""); fenced == 0 && code != http.StatusOK {
			fenced = time.Since(start)
			if code, body := h.post(ctx, leader, "/mcp", h.alice); code != 0 && code != http.StatusServiceUnavailable {
				t.Errorf("the fenced leader's /mcp: %d %s, want 503 or no answer", code, body)
			}
		}
		if code, _ := h.get(ctx, standby, "/readyz", ""); led == 0 && code == http.StatusOK {
			led = time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("cut off from the API server: the leader fenced itself after %v, the standby led after %v",
		fenced.Round(100*time.Millisecond), led.Round(100*time.Millisecond))
	if fenced >= led {
		t.Errorf("the standby led (%v) before the cut-off leader fenced itself (%v)", led, fenced)
	}
	h.firstCall(ctx, start, sessionPod, "print(x + 1)", "51", 2*time.Minute)
	uncut()
	if logs := h.logs(); !strings.Contains(logs, "lost the leader lease") {
		t.Errorf("the cut-off leader did not log its fence:\n%s", logs)
	}
}

// iptables runs iptables with args on the host, as the test's root.
func iptables(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %v: %v: %s", args, err, out)
	}
}

// initBody is an MCP initialize request.
const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`

// haDeployment is the deployment of TestKubeFailover.
type haDeployment struct {
	t      *testing.T
	k      *kube
	client *rest.RESTClient
	ns     string
	svc    string // http://CLUSTER-IP:80
	alice  string
}

// podHTTP is the client of requests to pod IPs: a dial to a pod that is
// gone may hang until the kernel gives up, so each is bounded, and no
// connection is kept.
var podHTTP = &http.Client{Transport: &http.Transport{
	DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext, DisableKeepAlives: true}}

// waitPair waits until the Deployment's two pods run, one of them Ready
// (the leader, which must not be the pod named not) and the other standing
// by, and returns them.
func (h *haDeployment) waitPair(ctx context.Context, not string) (leader, standby *corev1.Pod) {
	h.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var ready, waiting []corev1.Pod
		pods := h.k.podsIn(ctx, h.t, h.ns, "app.kubernetes.io/name=bridge")
		for _, p := range pods {
			switch {
			case p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "":
			case podReady(&p):
				ready = append(ready, p)
			default:
				if code, body := h.get(ctx, &p, "/readyz", ""); code == http.StatusServiceUnavailable && body == "standby\n" {
					waiting = append(waiting, p)
				}
			}
		}
		if len(ready) == 1 && len(waiting) == 1 && ready[0].Name != not {
			return &ready[0], &waiting[0]
		}
		if time.Now().After(deadline) {
			var logs string
			for _, p := range pods {
				logs += p.Name + ":\n" + podLog(h.t, h.client, h.ns, p.Name)
			}
			h.t.Fatalf("no leader and standby within 4 minutes (%d ready, %d standing by):\n%s", len(ready), len(waiting), logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logs are the bridge pods' logs, a restarted container's previous one too.
func (h *haDeployment) logs() string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	for _, p := range h.k.podsIn(ctx, h.t, h.ns, "app.kubernetes.io/name=bridge") {
		fmt.Fprintf(&b, "--- %s, previous run:\n%s\n--- %s:\n%s\n", p.Name, containerLog(h.client, h.ns, p.Name, true),
			p.Name, containerLog(h.client, h.ns, p.Name, false))
	}
	return b.String()
}

// get is a GET of path on the pod's port 8080 (the host reaches pod IPs),
// with token as the bearer when set: the status and the body.
func (h *haDeployment) get(ctx context.Context, p *corev1.Pod, path, token string) (int, string) {
	return h.do(ctx, http.MethodGet, "http://"+p.Status.PodIP+":8080"+path, token, "")
}

// post is an MCP initialize POSTed to the pod's path.
func (h *haDeployment) post(ctx context.Context, p *corev1.Pod, path, token string) (int, string) {
	return h.do(ctx, http.MethodPost, "http://"+p.Status.PodIP+":8080"+path, token, initBody)
}

func (h *haDeployment) do(ctx context.Context, method, url, token, body string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := podHTTP.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// call runs code in alice's default session through the Service, on a new
// MCP client (a client whose bridge went re-initializes), each step bounded.
func (h *haDeployment) call(ctx context.Context, code string) (_ string, err error) {
	st := &statusTrip{}
	tr, err := transport.NewStreamableHTTP(h.svc+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + h.alice}),
		transport.WithHTTPBasicClient(&http.Client{Transport: st}))
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil && st.refused != "" {
			err = fmt.Errorf("%w (%s)", err, st.refused)
		}
	}()
	c := client.NewClient(tr)
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Start(sctx); err != nil {
		return "", err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "bridge-e2e-ha", Version: "1"}
	if _, err := c.Initialize(sctx, init); err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": code}
	res, err := c.CallTool(cctx, req)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, part := range res.Content {
		if tc, ok := part.(mcp.TextContent); ok {
			out.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("run_python: %s", out.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// statusTrip is a new connection per request, recording the last
// refusal's status, server and body. A client that retries through a
// Service after a failure reaches whichever pod it routes to now; and on
// this machine a connection to a cluster IP that kube-proxy has no rule for
// at that instant reaches the sandbox's egress proxy, which answers 404 on
// any address: kept alive, that connection would answer every later
// request.
type statusTrip struct{ refused string }

func (s *statusTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := podHTTP.Transport.RoundTrip(req)
	if err == nil && resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		s.refused = fmt.Sprintf("%s %s from %q: %s", req.Method, resp.Status, resp.Header.Get("Server"), strings.TrimSpace(string(body)))
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	return resp, err
}

// run is call that must succeed; a refused or dropped connection is
// retried for 30 s, as the Service may not route to a new leader yet.
func (h *haDeployment) run(ctx context.Context, code string) string {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := h.call(ctx, code)
		if err == nil {
			return out
		}
		if strings.HasPrefix(err.Error(), "run_python:") || time.Now().After(deadline) {
			h.t.Fatalf("%s: %v", code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// firstCall retries, through the Service, code that prints the sandbox
// pod's name and then the session's state, until a sandbox pod other than
// old prints want: the new leader restored the session. It returns the time
// since start; any other state fails the test (it was lost), and so does no
// success within d.
func (h *haDeployment) firstCall(ctx context.Context, start time.Time, old, code, want string, d time.Duration) (time.Duration, string) {
	h.t.Helper()
	var last error
	for time.Since(start) < d {
		out, err := h.call(ctx, "import socket; print(socket.gethostname())\n"+code)
		pod, rest, _ := strings.Cut(out, "\n")
		got, note, _ := strings.Cut(rest, "\n")
		switch {
		case err != nil:
			code, body := h.do(ctx, http.MethodPost, h.svc+"/mcp", h.alice, initBody)
			last = fmt.Errorf("%w (a raw initialize: %d %.300s)", err, code, body)
		case pod == old:
			last = fmt.Errorf("still served by the old leader (its sandbox pod %s)", old)
		case got == want && strings.Contains(note, "restored to call"):
			return time.Since(start), pod
		default:
			h.t.Fatalf("%s after failover printed %q, want %q and the restore's note: the session's state was lost\n%s", code, rest, want, h.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.t.Fatalf("no call restored the session through the Service within %v of the leader's end; last: %v\n%s", d, last, h.logs())
	return 0, ""
}

// evict posts an Eviction of the pod (the Eviction API, as kubectl drain
// does), retrying a 429 until d has passed (a PDB's status is computed by
// the disruption controller, so a fresh budget may not refuse at once),
// and returns the last status.
func (h *haDeployment) evict(ctx context.Context, pod string, d time.Duration) int {
	h.t.Helper()
	body := mustJSON(h.t, map[string]any{"apiVersion": "policy/v1", "kind": "Eviction",
		"metadata": map[string]any{"name": pod, "namespace": h.ns}})
	deadline := time.Now().Add(d)
	for {
		var code int
		err := h.client.Post().AbsPath("/api/v1/namespaces", h.ns, "pods", pod, "eviction").Body(body).
			SetHeader("Content-Type", "application/json").Do(ctx).StatusCode(&code).Error()
		if code == 0 {
			h.t.Fatalf("eviction of %s: %v", pod, err)
		}
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			return code
		}
		time.Sleep(time.Second)
	}
}

// serviceURL is the Service bridge's cluster IP: the host reaches it
// through kube-proxy's rules, as a pod of the cluster does.
func serviceURL(ctx context.Context, t *testing.T, client *rest.RESTClient, ns string) string {
	t.Helper()
	raw, err := client.Get().AbsPath("/api/v1/namespaces", ns, "services", "bridge").Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := json.Unmarshal(raw, &svc); err != nil {
		t.Fatal(err)
	}
	return "http://" + svc.Spec.ClusterIP + ":80"
}
