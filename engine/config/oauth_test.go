package config

import (
	"reflect"
	"testing"
)

func TestParseOAuth(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		want        *OAuth
		err         string
	}{
		{"absent", `{"url":"https://x/mcp"}`, nil, ""},
		{"null", `{"url":"https://x/mcp","oauth":null}`, nil, ""},
		{"pre-registered", `{"url":"https://x/mcp","oauth":{"clientId":"c","clientSecret":"s","scopes":["a","b"],"callbackPort":8765}}`,
			&OAuth{ClientID: "c", ClientSecret: "s", Scopes: []string{"a", "b"}, CallbackPort: 8765}, ""},
		{"cimd", `{"url":"https://x/mcp","oauth":{"clientMetadataUrl":"https://me.example.org/bridge.json"}}`,
			&OAuth{ClientMetadataURL: "https://me.example.org/bridge.json"}, ""},
		{"not an object", `{"url":"https://x/mcp","oauth":"yes"}`, nil, `"oauth" must be an object, not a string`},
		{"bad port", `{"url":"https://x/mcp","oauth":{"callbackPort":70000}}`, nil, `"oauth": "callbackPort" must be a port number from 1 to 65535, not 70000`},
		{"secret without id", `{"url":"https://x/mcp","oauth":{"clientSecret":"s"}}`, nil, `"oauth": "clientSecret" needs "clientId"`},
		{"cimd over http", `{"url":"https://x/mcp","oauth":{"clientMetadataUrl":"http://me.example.org/bridge.json"}}`, nil,
			`"oauth": "clientMetadataUrl" must be an https URL with a path, not "http://me.example.org/bridge.json"`},
		{"scopes not strings", `{"url":"https://x/mcp","oauth":{"scopes":[1]}}`, nil, `"oauth": "scopes" must be a list of strings; scopes[0] is a number`},
	} {
		e, got := parseText(t, tc.entry)
		if got != tc.err {
			t.Errorf("%s: err = %q, want %q", tc.name, got, tc.err)
			continue
		}
		if got == "" && !reflect.DeepEqual(e.OAuth, tc.want) {
			t.Errorf("%s: OAuth = %+v, want %+v", tc.name, e.OAuth, tc.want)
		}
	}
	// A stdio entry has no sign-in: the block is reported as ignored.
	raw, _ := decodeJSON([]byte(`{"command":"x","oauth":{"clientId":"c"}}`))
	e, _, ignored, err := parseEntry("s", raw, "")
	if err != nil || e.OAuth != nil || !reflect.DeepEqual(ignored, []string{`"oauth"`}) {
		t.Errorf("stdio with oauth: %+v, ignored %v, err %v", e.OAuth, ignored, err)
	}
}

func TestParseIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		want        string
		err         string
	}{
		{"default", `{"url":"https://x/mcp"}`, IdentityShared, ""},
		{"shared", `{"url":"https://x/mcp","identity":"shared"}`, IdentityShared, ""},
		{"principal", `{"url":"https://x/mcp","identity":"principal"}`, IdentityPrincipal, ""},
		{"stdio shared", `{"command":"x","identity":"shared"}`, "", ""},
		{"unknown", `{"url":"https://x/mcp","identity":"user"}`, "", `"identity" must be "shared" or "principal", not "user"`},
		{"not a string", `{"url":"https://x/mcp","identity":true}`, "", `"identity" must be a string, not a boolean`},
		{"stdio", `{"command":"x","identity":"principal"}`, "", `"identity": "principal" needs an http or sse server: a stdio server has no per-user sign-in`},
		{"static header", `{"url":"https://x/mcp","identity":"principal","headers":{"authorization":"Bearer x"}}`, "",
			`"identity": "principal" and a static "Authorization" header exclude each other: the header would send one credential for every user; remove one`},
	} {
		e, got := parseText(t, tc.entry)
		if got != tc.err {
			t.Errorf("%s: err = %q, want %q", tc.name, got, tc.err)
			continue
		}
		if got == "" && e.Identity != tc.want {
			t.Errorf("%s: identity = %q, want %q", tc.name, e.Identity, tc.want)
		}
	}
	// The identity is part of the hash only when it is a principal's, so
	// shared entries keep the hash they had.
	shared, _ := decodeJSON([]byte(`{"url":"https://x/mcp"}`))
	principal, _ := decodeJSON([]byte(`{"url":"https://x/mcp","identity":"principal"}`))
	a, _, _, _ := parseEntry("s", shared, "")
	b, _, _, _ := parseEntry("s", principal, "")
	if hashEntry(a) == hashEntry(b) {
		t.Error("a change of identity must change the config hash")
	}
}

// parseText parses one entry given as JSON text; the error is its text, ""
// for none.
func parseText(t *testing.T, entry string) (Entry, string) {
	t.Helper()
	raw, err := decodeJSON([]byte(entry))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _, err := parseEntry("s", raw, "")
	if err != nil {
		return e, err.Error()
	}
	return e, ""
}
