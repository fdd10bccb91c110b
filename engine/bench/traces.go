package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// traceFigures measures what exporting traces costs each call under bridge
// serve: warm print(1) and a proxied echo with spans exported to a live
// OTLP/HTTP receiver, to a closed port and to a collector that accepts
// and never answers, each against the same with traces off, in the same
// run (target: within 5%). The audit trail is off in all four bridges, so
// only the spans differ. The calls alternate between the bridges in
// blocks, so all see the same machine over the same seconds.
func traceFigures(ctx context.Context, o Options, r *Report) error {
	live, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer live.close()
	silent, err := startSilentCollector()
	if err != nil {
		return err
	}
	defer silent.close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	subjects := []struct{ label, env string }{
		{"off", "OTEL_TRACES_EXPORTER=none"},
		{"a live OTLP/HTTP receiver", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + live.addr()},
		{"a closed port", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + closedAddr},
		{"a collector that never answers", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + silent.addr()},
	}
	envs := make([][]string, len(subjects))
	for i, s := range subjects {
		envs[i] = []string{"MCP_BRIDGE_AUDIT=off", s.env, "OTEL_BSP_SCHEDULE_DELAY=200"}
	}
	hs, stop, err := serveSideBySide(ctx, o, envs)
	defer stop()
	if err != nil {
		return err
	}
	n := sideBySideSamples(o)
	for _, c := range []struct{ id, name, code string }{
		{"print", "warm print(1)", "print(1)"},
		{"echo", "a call with one proxied echo", `await mcp_bench.echo("x")`},
	} {
		lats, err := alternate(len(hs), n, func(i int) error { return hs[i].runWith(ctx, c.code, "bench") })
		if err != nil {
			return err
		}
		off := ms(pct(lats[0], 50))
		for i, s := range subjects[1:] {
			v := ms(pct(lats[i+1], 50))
			r.add(Figure{ID: fmt.Sprintf("traces.%s.%d", c.id, i+1), Name: fmt.Sprintf("bridge serve, %s, spans exported to %s, p50", c.name, s.label),
				Value: v, Unit: "ms", Baseline: "the same with traces off, p50", BaseVal: off, Samples: len(lats[i+1]), Target: "<= 1.05x"}, v <= off*1.05)
		}
	}
	// The live receiver got the spans: the figures above are of a bridge
	// that exported, not of one that silently did not.
	deadline := time.Now().Add(5 * time.Second)
	for live.exports.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if live.exports.Load() == 0 {
		return fmt.Errorf("traces: the live receiver got no export from the bridge")
	}
	return nil
}

// otlpSink answers every OTLP/HTTP export with success, counting them.
type otlpSink struct {
	ln      net.Listener
	srv     *http.Server
	done    chan struct{}
	exports atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 64<<20))
		s.exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty body: an ExportTraceServiceResponse with nothing rejected
	})}
	go func() { defer close(s.done); _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) addr() string { return s.ln.Addr().String() }

func (s *otlpSink) close() {
	_ = s.srv.Close()
	<-s.done
}

// silentCollector accepts connections and never answers them.
type silentCollector struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startSilentCollector() (*silentCollector, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &silentCollector{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

func (s *silentCollector) addr() string { return s.ln.Addr().String() }

func (s *silentCollector) close() {
	_ = s.ln.Close()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}
