package engine

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a self-signed certificate for names valid from
// notBefore to notAfter, and its key (or another key when mismatched).
func writePair(t *testing.T, dir string, notBefore, notAfter time.Time, mismatched bool, names ...string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bridge"}, NotBefore: notBefore, NotAfter: notAfter}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	if mismatched {
		if k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestDoctorTLS: doctor checks bridge serve's TLS pair: a key of another
// certificate, an expired or soon-expiring certificate, its names.
func TestDoctorTLS(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name       string
		from, to   time.Time
		mismatched bool
		names      []string
		want       string
	}{
		{"good", now.Add(-day), now.Add(90 * day), false, []string{"bridge.example.com", "10.0.0.5"},
			"OK tls: CERT and its key match; for bridge.example.com, 10.0.0.5; valid until 2027-02-26"},
		{"soon", now.Add(-day), now.Add(5 * day), false, []string{"b.example"},
			"WARN tls: CERT expires on 2026-12-03, in 5 days: renew it (bridge serve takes the new pair without a restart); for b.example"},
		{"expired", now.Add(-10 * day), now.Add(-day), false, []string{"b.example"},
			"FAIL tls: CERT expired on 2026-11-27: renew it (bridge serve takes the new pair without a restart)"},
		{"mismatched key", now.Add(-day), now.Add(90 * day), true, []string{"b.example"},
			"FAIL tls: CERT and KEY: tls: private key does not match public key; give bridge serve the certificate and its own key (PEM)"},
	} {
		cert, key := writePair(t, t.TempDir(), tc.from, tc.to, tc.mismatched, tc.names...)
		c := DoctorTLS(cert, key, now)
		got := strings.NewReplacer(cert, "CERT", key, "KEY").Replace(c.Status + " " + c.Name + ": " + c.Detail)
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
