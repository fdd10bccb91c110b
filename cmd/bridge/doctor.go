package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine"
)

// doctorCmd prints one `OK|WARN|FAIL <check>: <detail>` line per check and
// exits 1 when any check failed.
func (m *Main) doctorCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	server := fs.String("server", "", "check only the server `NAME`")
	tlsCert := fs.String("tls-cert", "", "also check bridge serve's certificate `FILE` (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "also check bridge serve's key `FILE` (with --tls-cert)")
	pos, code, ok := m.parse("doctor", fs, args, -1)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return m.usage("doctor: unexpected argument %q: doctor takes no arguments; to check one server: bridge doctor --server %s", pos[0], pos[0])
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return m.usage("doctor: --tls-cert and --tls-key go together, as for bridge serve")
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	e := engine.New(env, Version(), m.logger(env, m.levelFromEnv(env, zerolog.ErrorLevel)), m.Getenv, false)
	checks := e.Doctor(ctx, *server)
	if *tlsCert != "" {
		checks = append(checks, engine.DoctorTLS(*tlsCert, *tlsKey, time.Now()))
	}
	failed := false
	for _, c := range checks {
		failed = failed || c.Status == "FAIL"
	}
	if *asJSON {
		b, _ := json.MarshalIndent(checks, "", "  ")
		fmt.Fprintln(m.Stdout, string(b))
	} else {
		for _, c := range checks {
			fmt.Fprintf(m.Stdout, "%-4s %s: %s\n", c.Status, c.Name, c.Detail)
		}
	}
	if failed {
		return 1
	}
	return 0
}
