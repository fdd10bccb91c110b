package httpd

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// guard gives every endpoint the browser checks /mcp has: the Origin
// check (origin) and the Host check mcp-go's streamable HTTP server makes
// against DNS rebinding (hostCheck). Without them a page whose domain
// rebinds to a loopback bridge under --insecure-no-auth could read
// /metrics from the victim's browser.
func (cfg Config) guard(next http.Handler) http.Handler {
	return cfg.hostCheck(cfg.origin(next))
}

// hostCheck refuses a request that arrives on a loopback connection with a
// Host that is not loopback: a browser sends the rebound domain's name.
// It is mcp-go's check (server.WithDisableLocalhostProtection), for every
// endpoint; requests on other addresses are not affected.
func (cfg Config) hostCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local == nil || !loopbackHost(local.String()) || loopbackHost(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		cfg.Log.Info().Str("remote", r.RemoteAddr).Msg("request refused: Host is not loopback on a loopback connection (DNS rebinding)")
		closing(w)
		http.Error(w, "forbidden: on a loopback address the Host header must be localhost or a loopback IP", http.StatusForbidden)
	})
}

// loopbackHost reports whether addr (host or host:port) names loopback.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
