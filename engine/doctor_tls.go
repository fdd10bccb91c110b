package engine

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"
)

// tlsSoon is how close to its end a certificate gets a warning.
const tlsSoon = 14 * 24 * time.Hour

// DoctorTLS checks bridge serve's --tls-cert and --tls-key: that the key
// matches the certificate, the names it serves, and how long it is valid.
func DoctorTLS(certFile, keyFile string, now time.Time) Check {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return Check{"FAIL", "tls", fmt.Sprintf("%s and %s: %v; give bridge serve the certificate and its own key (PEM)", certFile, keyFile, err)}
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return Check{"FAIL", "tls", fmt.Sprintf("%s: %v", certFile, err)}
		}
	}
	names := strings.Join(append(append([]string{}, leaf.DNSNames...), ipStrings(leaf)...), ", ")
	if names == "" {
		names = "no DNS or IP name (clients check the name: add a subjectAltName)"
	}
	left := leaf.NotAfter.Sub(now)
	switch {
	case now.Before(leaf.NotBefore):
		return Check{"FAIL", "tls", fmt.Sprintf("%s is not valid before %s", certFile, leaf.NotBefore.Format(time.DateOnly))}
	case left <= 0:
		return Check{"FAIL", "tls", fmt.Sprintf("%s expired on %s: renew it (bridge serve takes the new pair without a restart)", certFile, leaf.NotAfter.Format(time.DateOnly))}
	case left < tlsSoon:
		return Check{"WARN", "tls", fmt.Sprintf("%s expires on %s, in %d days: renew it (bridge serve takes the new pair without a restart); for %s",
			certFile, leaf.NotAfter.Format(time.DateOnly), int(left.Hours()/24), names)}
	}
	return Check{"OK", "tls", fmt.Sprintf("%s and its key match; for %s; valid until %s", certFile, names, leaf.NotAfter.Format(time.DateOnly))}
}

func ipStrings(c *x509.Certificate) []string {
	out := make([]string, len(c.IPAddresses))
	for i, ip := range c.IPAddresses {
		out[i] = ip.String()
	}
	return out
}
