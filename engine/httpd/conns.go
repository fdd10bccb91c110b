package httpd

import (
	"net"
	"sync"

	"github.com/rs/zerolog"
)

// LimitPerAddr returns ln with at most max connections open at once from
// one remote address (IP): a connection over it is closed as soon as it is
// accepted, and the first refused while an address is over the cap is
// logged. SSE streams count like any connection. max <= 0 is no cap.
func LimitPerAddr(ln net.Listener, max int, log zerolog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &addrLimit{Listener: ln, max: max, log: log, open: map[string]int{}, warned: map[string]bool{}}
}

type addrLimit struct {
	net.Listener
	max int
	log zerolog.Logger

	mu     sync.Mutex
	open   map[string]int  // connections open, by IP
	warned map[string]bool // logged since the address was last under the cap
}

// Accept returns the next connection within its address's cap; the ones
// over it are closed here and never reach the server.
func (l *addrLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		if l.take(ip) {
			return &limitedConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		_ = c.Close()
	}
}

func (l *addrLimit) take(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] >= l.max {
		if !l.warned[ip] {
			l.warned[ip] = true
			l.log.Warn().Str("remote", ip).Int("max", l.max).
				Msg("connections refused: this address has MCP_BRIDGE_MAX_CONNS_PER_ADDR open (behind a reverse proxy or a Kubernetes Service, raise it or set 0)")
		}
		return false
	}
	l.open[ip]++
	return true
}

func (l *addrLimit) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
		delete(l.warned, ip)
	}
}

// limitedConn gives its slot back once, on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
