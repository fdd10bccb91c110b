package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// forgeAcksCode sends acks for far more than the host ever wrote, every
// 10 ms, from a daemon thread: on a pod's link (which counts credit) the
// host caps each at what it has written, so they can only open the window
// onto the transport's own buffers; on a container's link they are dropped
// frames. Its jam pads the ids its replies echo: a pod's link buffers tens
// of MiB across its hops (the API server, kubelet), which small replies
// fill only in minutes.
const forgeAcksCode = `def forge_acks():
    while True:
        put({'jsonrpc': '2.0', 'method': 'ack', 'params': {'bytes': 1 << 60}})
        time.sleep(0.01)
threading.Thread(target=forge_acks, daemon=True).start()
`

// TestHostileForgedAcks: a sandbox that stops reading its link and forges
// acks while it jams it is still declared dead by the link-stall bound,
// and the bridge's memory stays bounded: forged credit lets the host fill
// only the buffers between it and the sandbox, never its own.
func TestHostileForgedAcks(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, nil)
	pid := b.pid()
	removeLeftovers(t, pid)
	b.call(map[string]any{"code": "x = 1", "session": "forge"})
	before := procStatus(t, pid, "VmHWM")
	start := time.Now()
	r, err := b.callArgsWithin(100*time.Second, map[string]any{"code": jamCode + forgeAcksCode + "stop_reader()\njam(pad=16384)\n", "session": "forge", "timeout": 60})
	peak := procStatus(t, pid, "VmHWM")
	if err != nil {
		t.Fatalf("the jamming call never answered: %v\nstderr: %s", err, tail(b.stderr.String(), 4000))
	}
	sc := structured(t, r)
	t.Logf("jamming call with forged acks answered after %v: %v; bridge VmHWM %d MiB before, %d MiB after",
		time.Since(start).Round(10*time.Millisecond), sc["error"], before>>10, peak>>10)
	if sc["status"] != "error" || !strings.Contains(fmt.Sprint(sc["error"]), "stopped reading its link") {
		t.Errorf("jamming call with forged acks: %v, want the stalled-link error", sc)
	}
	if grew := peak - before; grew > 256<<10 {
		t.Errorf("bridge peak RSS grew by %d MiB; want < 256 MiB", grew>>10)
	}
	r, err = b.callArgsWithin(60*time.Second, map[string]any{"code": "print('ok')", "session": "forge"})
	if err != nil || r.IsError || !strings.HasPrefix(text(t, r), "ok") {
		t.Fatalf("the session after the jam: %v %v", err, r)
	}
}
