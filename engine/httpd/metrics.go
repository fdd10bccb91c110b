package httpd

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are bridge serve's Prometheus metrics, on a registry of their
// own (no global state, so tests can build several). Labels are
// principals, statuses and configured server names: all bounded by the
// tokens file and the configuration, never by what a client sends.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	sessions *prometheus.GaugeVec
	inflight *prometheus.GaugeVec
	proxied  *prometheus.CounterVec
	http     *prometheus.CounterVec
	leader   prometheus.Gauge
}

// NewMetrics registers every metric.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bridge_calls_total", Help: "run_python calls by principal and result status.",
	}, []string{"principal", "status"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bridge_call_errors_total", Help: "run_python calls that did not succeed, by principal and status.",
	}, []string{"principal", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "bridge_call_duration_seconds", Help: "run_python call latency, queueing included, by principal.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"principal"})
	m.sessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bridge_live_sessions", Help: "Live sessions by principal.",
	}, []string{"principal"})
	m.inflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bridge_calls_in_flight", Help: "run_python calls running or queued, by principal.",
	}, []string{"principal"})
	m.proxied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bridge_proxied_calls_total", Help: "Tool calls proxied to configured MCP servers, by server.",
	}, []string{"server"})
	m.http = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bridge_http_requests_total", Help: "HTTP requests by response code class (refusals included; the /healthz and /readyz probes not).",
	}, []string{"code"})
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bridge_leader", Help: "1 while this replica serves /mcp (the leader, or the only replica); 0 while it stands by or after it lost the leader lease.",
	})
	m.leader.Set(1)
	m.reg.MustRegister(m.calls, m.errors, m.latency, m.sessions, m.inflight, m.proxied, m.http, m.leader,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Call records one finished run_python call.
func (m *Metrics) Call(principal, status string, d time.Duration) {
	m.calls.WithLabelValues(principal, status).Inc()
	if status != "success" {
		m.errors.WithLabelValues(principal, status).Inc()
	}
	m.latency.WithLabelValues(principal).Observe(d.Seconds())
}

// InFlight moves principal's in-flight gauge by delta.
func (m *Metrics) InFlight(principal string, delta float64) {
	m.inflight.WithLabelValues(principal).Add(delta)
}

// Sessions sets the live session gauges: every principal the tokens file
// names is reported, 0 when it has none.
func (m *Metrics) Sessions(byPrincipal map[string]int, principals []string) {
	for _, p := range principals {
		m.sessions.WithLabelValues(p).Set(float64(byPrincipal[p]))
	}
	for p, n := range byPrincipal {
		m.sessions.WithLabelValues(p).Set(float64(n))
	}
}

// Proxied counts one tool call proxied to server.
func (m *Metrics) Proxied(server string) {
	m.proxied.WithLabelValues(server).Inc()
}

// Leader sets bridge_leader: whether this replica serves /mcp.
func (m *Metrics) Leader(serving bool) {
	v := 0.0
	if serving {
		v = 1
	}
	m.leader.Set(v)
}

// HTTP counts one response by its status code's class.
func (m *Metrics) HTTP(code int) {
	m.http.WithLabelValues(string(rune('0'+code/100)) + "xx").Inc()
}
