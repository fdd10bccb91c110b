package main

import (
	"context"
	"crypto/tls"
	"flag"
	"runtime/debug"
	"strings"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/httpd"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// serveGCPercent is bridge serve's GOGC unless the environment sets one.
const serveGCPercent = 400

// serveCmd serves MCP over streamable HTTP.
func (m *Main) serveCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` to serve MCP on, at /mcp")
	cert := fs.String("tls-cert", "", "TLS certificate `FILE` (PEM); re-read when it changes")
	key := fs.String("tls-key", "", "TLS private key `FILE` (PEM); re-read when it changes")
	drain := fs.Duration("drain-timeout", engine.DefaultDrainTimeout, "on SIGTERM, how long calls in flight may finish before they are interrupted")
	noAuth := fs.Bool("insecure-no-auth", false, "serve without tokens (loopback --listen only)")
	var origins stringList
	fs.Var(&origins, "allowed-origin", "a browser `ORIGIN` (https://host:port) allowed besides loopback and the listen host; repeatable")
	var metricsPrincipals stringList
	fs.Var(&metricsPrincipals, "metrics-principal", "a `PRINCIPAL` that may read /metrics (its series name every principal); repeatable; any other principal gets 403. "+
		"Not given: every principal may read it. Under --insecure-no-auth the principal is \"anonymous\"")
	leaderElect := fs.Bool("leader-elect", false, "stand by until this replica holds the leader Lease, so that replicas sharing a state volume fail over "+
		"(MCP_BRIDGE_RUNTIME=kubernetes; bridge kubernetes manifests --replicas 2 sets it)")
	publicURL := fs.String("public-url", "", "the bridge's external base `URL` (https://bridge.example.com), where browsers come back after a principal's own sign-in "+
		"(/oauth/callback; servers with \"identity\": \"principal\"). Default: the --listen address")
	watch := fs.Bool("watch", false, "reload the server configuration when its files change (and on SIGHUP)")
	if _, code, ok := m.parse("serve", fs, args, 0); !ok {
		return code
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	opts := engine.HTTPOptions{Listen: *listen, TLSCert: *cert, TLSKey: *key, DrainTimeout: *drain,
		AllowedOrigins: origins, InsecureNoAuth: *noAuth, MetricsPrincipals: metricsPrincipals, LeaderElect: *leaderElect, PublicURL: *publicURL}
	if err := engine.CheckListen(opts, env.TokensFile); err != nil {
		return m.usage("%v", err)
	}
	if _, err := engine.PublicURL(opts); err != nil {
		return m.usage("%v", err)
	}
	if *leaderElect && env.Runtime != engine.RuntimeKubernetes {
		return m.usage("%v", engine.ErrLeaderElect)
	}
	// The files are read again by the server (and re-read on change);
	// reading them here turns a bad one into one line and exit 2.
	if env.TokensFile != "" {
		if _, _, err := httpd.LoadTokens(env.TokensFile); err != nil {
			return m.usage("serve: MCP_BRIDGE_TOKENS_FILE=%s: %v", env.TokensFile, err)
		}
	}
	if *cert != "" {
		if _, err := tls.LoadX509KeyPair(*cert, *key); err != nil {
			return m.usage("serve: --tls-cert/--tls-key: %v", err)
		}
	}
	env.Serving = true
	if m.Getenv("GOGC") == "" {
		// Many principals' calls make garbage at a rate a small heap
		// collects often; collecting at 4x growth trades a few MiB for the
		// collector's CPU, which the calls of other principals wait on
		// (docs/DECISIONS.md, "Serving a team over HTTP").
		debug.SetGCPercent(serveGCPercent)
	}
	log := m.logger(env, env.LogLevel)
	e := engine.New(env, Version(), log, m.Getenv, *watch)
	if err := e.CheckIdentities(opts); err != nil {
		return m.usage("%v", err)
	}
	if err := e.ServeHTTP(ctx, opts); err != nil {
		log.Error().Err(err).Msg("bridge stopped")
		return 1
	}
	return 0
}
