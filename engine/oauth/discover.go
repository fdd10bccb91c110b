package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxMeta bounds one metadata or token response body.
const maxMeta = 1 << 20

// challenge is a Bearer WWW-Authenticate challenge (RFC 6750, RFC 9728).
type challenge struct {
	ResourceMetadata string
	Scope            string
	Error            string
}

// parseChallenge reads the Bearer challenge among the header's values.
func parseChallenge(values []string) challenge {
	var c challenge
	for _, v := range values {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		for k, val := range authParams(rest) {
			switch strings.ToLower(k) {
			case "resource_metadata":
				c.ResourceMetadata = val
			case "scope":
				c.Scope = val
			case "error":
				c.Error = val
			}
		}
	}
	return c
}

// authParams parses `k=v, k="quoted, value"` pairs.
func authParams(s string) map[string]string {
	out := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,\t")
		if s == "" {
			return out
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return out
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val strings.Builder
		if strings.HasPrefix(s, `"`) {
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			s = s[min(i+1, len(s)):]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val.WriteString(strings.TrimSpace(s[:end]))
			s = s[end:]
		}
		out[key] = val.String()
	}
}

// resourceMeta is protected resource metadata (RFC 9728).
type resourceMeta struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// serverMeta is authorization server metadata (RFC 8414, OpenID Connect
// Discovery).
type serverMeta struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
}

// getJSON fetches u into v; found is false on 404 and the like.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMeta))
		return false, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMeta+1))
	if err != nil {
		return false, err
	}
	if len(data) > maxMeta {
		return false, fmt.Errorf("%s: metadata over %d bytes", u, maxMeta)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: metadata is not JSON: %w", u, err)
	}
	return true, nil
}

// origin is scheme://host of u.
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// sameOrigin compares scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// isLoopback reports a host of this machine, where plain http is allowed.
func isLoopback(u *url.URL) bool {
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// secureURL checks that an endpoint that receives secrets is https, or
// http on loopback.
func secureURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u))) {
		return nil, fmt.Errorf("%s %q must be an https URL", what, raw)
	}
	return u, nil
}

// challengeURL checks the resource_metadata a 401 challenge names: https,
// or plain http at exactly the origin (scheme, host and port) of the
// configured server, so a challenge cannot send the bridge over plain http
// to another service of the machine. The authorization server that the
// metadata names may sit on another loopback port (as the conformance
// suite's does): the metadata comes from the configured server's own
// origin, which the operator chose.
func challengeURL(raw string, server *url.URL) error {
	u, err := secureURL("resource_metadata", raw)
	if err != nil {
		return err
	}
	if u.Scheme == "http" && !sameOrigin(u, server) {
		return fmt.Errorf("resource_metadata %q must be an https URL: plain http is allowed only at the server's own origin %s", raw, origin(server))
	}
	return nil
}

// discoverResource finds the protected resource metadata of the server at
// serverURL: the challenge's resource_metadata, then the path-based and
// root well-known locations. nil without any (an older server whose
// authorization server is its own origin).
func discoverResource(ctx context.Context, hc *http.Client, serverURL *url.URL, ch challenge) (*resourceMeta, error) {
	var candidates []string
	if ch.ResourceMetadata != "" {
		if err := challengeURL(ch.ResourceMetadata, serverURL); err != nil {
			return nil, err
		}
		candidates = append(candidates, ch.ResourceMetadata)
	}
	if p := strings.TrimSuffix(serverURL.EscapedPath(), "/"); p != "" {
		candidates = append(candidates, origin(serverURL)+"/.well-known/oauth-protected-resource"+p)
	}
	candidates = append(candidates, origin(serverURL)+"/.well-known/oauth-protected-resource")
	for _, c := range candidates {
		var m resourceMeta
		found, err := getJSON(ctx, hc, c, &m)
		if err != nil {
			return nil, fmt.Errorf("protected resource metadata: %w", err)
		}
		if !found {
			continue
		}
		if m.Resource != "" && !resourceCovers(m.Resource, serverURL) {
			return nil, fmt.Errorf("protected resource metadata at %s is for %q, not this server's URL %s", c, m.Resource, serverURL)
		}
		return &m, nil
	}
	return nil, nil
}

// resourceCovers reports whether resource identifies serverURL: the same
// origin, and its path a segment prefix of the server's.
func resourceCovers(resource string, serverURL *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || !sameOrigin(r, serverURL) || r.Fragment != "" {
		return false
	}
	rp := strings.TrimSuffix(r.Path, "/")
	sp := strings.TrimSuffix(serverURL.Path, "/")
	return rp == "" || sp == rp || strings.HasPrefix(sp, rp+"/")
}

// discoverServer fetches the metadata of the authorization server issuer,
// trying the RFC 8414 and OpenID Connect locations in the order the MCP
// spec gives. legacy (no protected resource metadata) falls back to the
// default endpoints at the issuer's root.
func discoverServer(ctx context.Context, hc *http.Client, issuer string, legacy bool) (*serverMeta, error) {
	u, err := secureURL("authorization server", issuer)
	if err != nil {
		return nil, err
	}
	o := origin(u)
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	var candidates []string
	if p != "" {
		candidates = []string{o + "/.well-known/oauth-authorization-server" + p, o + "/.well-known/openid-configuration" + p, o + p + "/.well-known/openid-configuration"}
	} else {
		candidates = []string{o + "/.well-known/oauth-authorization-server", o + "/.well-known/openid-configuration"}
	}
	for _, c := range candidates {
		var m serverMeta
		found, err := getJSON(ctx, hc, c, &m)
		if err != nil {
			return nil, fmt.Errorf("authorization server metadata: %w", err)
		}
		if !found {
			continue
		}
		// RFC 8414 §3.3: the issuer must be the one asked for, so one
		// server cannot pose as another (mix-up).
		if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("authorization server metadata at %s names issuer %q, not %q", c, m.Issuer, issuer)
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return nil, fmt.Errorf("authorization server metadata at %s lacks the authorization or token endpoint", c)
		}
		return &m, checkEndpoints(&m)
	}
	if !legacy {
		return nil, fmt.Errorf("authorization server %s publishes no metadata", issuer)
	}
	m := &serverMeta{Issuer: issuer, AuthorizationEndpoint: o + "/authorize", TokenEndpoint: o + "/token", RegistrationEndpoint: o + "/register"}
	return m, nil
}

func checkEndpoints(m *serverMeta) error {
	for _, e := range []struct{ what, u string }{{"authorization endpoint", m.AuthorizationEndpoint}, {"token endpoint", m.TokenEndpoint}} {
		if _, err := secureURL(e.what, e.u); err != nil {
			return err
		}
	}
	if m.RegistrationEndpoint != "" {
		if _, err := secureURL("registration endpoint", m.RegistrationEndpoint); err != nil {
			return err
		}
	}
	if len(m.CodeChallengeMethodsSupported) > 0 && !contains(m.CodeChallengeMethodsSupported, "S256") {
		return errors.New("the authorization server does not support PKCE with S256, which sign-in requires")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
