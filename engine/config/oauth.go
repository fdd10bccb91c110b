package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// OAuth is an http or sse entry's "oauth" block: how the bridge registers
// as an OAuth client of the server's authorization server. All fields are
// optional; without a client id the bridge uses the Client ID Metadata
// Document URL, then dynamic client registration.
type OAuth struct {
	ClientID          string
	ClientSecret      string
	Scopes            []string
	CallbackPort      int    // the loopback redirect port; 0: any free port
	ClientMetadataURL string // an https URL whose document names the bridge as a client
}

// parseOAuth reads the "oauth" object of o; nil when absent or null.
func parseOAuth(o *object) (*OAuth, error) {
	v, ok := o.get("oauth")
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf(`"oauth" must be an object, not %s`, kind(v))
	}
	var a OAuth
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"clientId", &a.ClientID}, {"clientSecret", &a.ClientSecret}, {"clientMetadataUrl", &a.ClientMetadataURL}} {
		if *f.dst, err = stringField(m, f.key); err != nil {
			return nil, fmt.Errorf(`"oauth": %w`, err)
		}
	}
	if a.Scopes, err = listField(m, "scopes"); err != nil {
		return nil, fmt.Errorf(`"oauth": %w`, err)
	}
	if p, ok := m.get("callbackPort"); ok && p != nil {
		n, isNum := p.(json.Number)
		port, perr := n.Int64()
		if !isNum || perr != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf(`"oauth": "callbackPort" must be a port number from 1 to 65535, not %v`, p)
		}
		a.CallbackPort = int(port)
	}
	if a.ClientSecret != "" && a.ClientID == "" {
		return nil, fmt.Errorf(`"oauth": "clientSecret" needs "clientId"`)
	}
	if a.ClientMetadataURL != "" {
		u, err := url.Parse(a.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return nil, fmt.Errorf(`"oauth": "clientMetadataUrl" must be an https URL with a path, not %q`, a.ClientMetadataURL)
		}
	}
	return &a, nil
}
