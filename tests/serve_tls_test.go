package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn, and
// its key, replacing the files at once as a renewal does.
func writeCert(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string]*pem.Block{keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}, certFile: {Type: "CERTIFICATE", Bytes: der}} {
		if err := os.WriteFile(f+".new", pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f+".new", f); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeTLS: bridge serve answers MCP over HTTPS with --tls-cert and
// --tls-key, and serves a renewed certificate without a restart.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCert(t, certFile, keyFile, "first")
	tokens := writeTokens(t, "alice "+aliceToken)
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens}, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(s.base, "https://") {
		t.Fatalf("serving %s, want https", s.base)
	}
	// The client trusts nothing but checks nothing either: the test looks
	// at which certificate it was given.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // the test reads the served certificate
	served := func() string {
		resp, err := hc.Get(s.base + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz over TLS: %v", err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("certificate %q, want first", got)
	}
	c, err := client.NewStreamableHttpClient(s.base+"/mcp", transport.WithHTTPBasicClient(hc),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceToken}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25"
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize over TLS: %v", err)
	}
	if r := callHTTP(t, c, map[string]any{"code": "print(6 * 7)"}); text(t, r) != "42" {
		t.Fatalf("run_python over TLS: %q", text(t, r))
	}
	writeCert(t, certFile, keyFile, "second")
	deadline := time.Now().Add(10 * time.Second)
	for served() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served within 10s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
