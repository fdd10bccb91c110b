package httpd

import (
	"net/http"
	"slices"

	"github.com/bridge-mcp/bridge/actors"
)

// metricsAuth lets only the --metrics-principal principals read /metrics:
// its series name every principal and what each is doing. With none
// given, every authenticated principal may (the behaviour before the
// flag). It runs after auth, which put the principal in the context.
func (cfg Config) metricsAuth(next http.Handler) http.Handler {
	if len(cfg.MetricsPrincipals) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := actors.PrincipalFrom(r.Context())
		if slices.Contains(cfg.MetricsPrincipals, p) {
			next.ServeHTTP(w, r)
			return
		}
		cfg.Log.Info().Str("remote", r.RemoteAddr).Str("principal", p).Msg("request refused: /metrics is for the --metrics-principal principals only")
		closing(w)
		http.Error(w, "forbidden: this principal may not read /metrics; bridge serve --metrics-principal names those that may", http.StatusForbidden)
	})
}
