package kube

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// TestRouteKlog checks that client-go's klog output reaches the bridge's
// zerolog logger: errors at warn; the expected errors of an ended attach
// and of a standby's first try to create the leader Lease, and info lines,
// at debug.
func TestRouteKlog(t *testing.T) {
	var buf bytes.Buffer
	routeKlog(zerolog.New(&buf).Level(zerolog.DebugLevel))
	klog.ErrorS(errors.New("boom"), "stream failed")
	klog.ErrorS(errors.New("read tcp: use of closed network connection"), "Unhandled Error")
	klog.ErrorS(nil, "Websocket Ping failed: write tcp 10.0.0.1:1->10.0.0.2:2: use of closed network connection")
	klog.Errorf("error initially creating leader election record: %v", `leases.coordination.k8s.io "bridge-leader" already exists`)
	klog.InfoS("hello", "k", "v")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want 5:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`"level":"warn"`, `"level":"debug"`, `"level":"debug"`, `"level":"debug"`, `"level":"debug"`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"from":"client-go"`) {
			t.Errorf("line %d = %s, want %s from client-go", i, lines[i], want)
		}
	}
}
