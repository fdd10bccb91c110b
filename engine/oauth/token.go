package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// tokenResponse is a token endpoint's answer (RFC 6749 §5).
type tokenResponse struct {
	AccessToken  string      `json:"access_token"`
	TokenType    string      `json:"token_type"`
	RefreshToken string      `json:"refresh_token"`
	ExpiresIn    json.Number `json:"expires_in"`
	Scope        string      `json:"scope"`
	IDToken      string      `json:"id_token"`
	Error        string      `json:"error"`
	ErrorDesc    string      `json:"error_description"`
}

// errInvalidGrant is a refresh token the server no longer accepts.
var errInvalidGrant = errors.New("the authorization server refused the refresh token")

// tokenRequest posts form to rec's token endpoint with rec's client
// authentication and returns the new tokens. Its errors carry the server's
// error code and description, never a token or secret.
func tokenRequest(ctx context.Context, hc *http.Client, rec *Record, form url.Values) (*tokenResponse, error) {
	form.Set("client_id", rec.ClientID)
	switch rec.AuthMethod {
	case "client_secret_post":
		form.Set("client_secret", rec.ClientSecret)
	case "client_secret_basic":
		form.Del("client_id")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if rec.AuthMethod == "client_secret_basic" {
		// RFC 6749 §2.3.1: both parts form-encoded before base64.
		req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(rec.ClientSecret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMeta))
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	var tr tokenResponse
	jerr := json.Unmarshal(data, &tr)
	if resp.StatusCode != http.StatusOK || tr.Error != "" {
		if tr.Error == "invalid_grant" {
			return nil, errInvalidGrant
		}
		if tr.Error != "" {
			return nil, fmt.Errorf("token request: the authorization server answered %s: %s", oneLine(tr.Error), oneLine(tr.ErrorDesc))
		}
		return nil, fmt.Errorf("token request: the authorization server answered HTTP %d", resp.StatusCode)
	}
	if jerr != nil || tr.AccessToken == "" {
		return nil, errors.New("token request: the answer has no access_token")
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "Bearer") {
		return nil, fmt.Errorf("token request: token type %q is not Bearer", oneLine(tr.TokenType))
	}
	return &tr, nil
}

// apply stores tr in rec; requested is the scope asked for, kept when the
// server does not say which it granted.
func (tr *tokenResponse) apply(rec *Record, requested string, now time.Time) {
	rec.AccessToken = tr.AccessToken
	if tr.RefreshToken != "" {
		rec.RefreshToken = tr.RefreshToken
	}
	rec.Scope = requested
	if tr.Scope != "" {
		rec.Scope = strings.Join(strings.Fields(oneLine(tr.Scope)), " ")
	}
	if a := tr.account(); a != "" {
		rec.Account = a
	}
	rec.ExpiresAt, rec.RefreshAt = time.Time{}, time.Time{}
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 {
		life := time.Duration(n) * time.Second
		rec.ExpiresAt = now.Add(life)
		rec.RefreshAt = rec.ExpiresAt.Add(-min(time.Minute, life/2))
	}
}

// account is the upstream account the tokens are for, when the server
// names it: the OpenID Connect ID token's preferred_username, email, name
// or subject, first found. It is shown to the person who signed in (login
// CSRF: who did they sign in as?), never trusted for anything: the token
// is read without checking its signature.
func (tr *tokenResponse) account() string {
	parts := strings.Split(tr.IDToken, ".")
	if len(parts) != 3 || len(parts[1]) > 16<<10 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var claims map[string]any
	if json.Unmarshal(raw, &claims) != nil {
		return ""
	}
	for _, k := range []string{"preferred_username", "email", "name", "sub"} {
		if v, ok := claims[k].(string); ok && strings.TrimSpace(v) != "" {
			a := oneLine(v)
			if len(a) > 100 {
				a = a[:100] + "…"
			}
			return a
		}
	}
	return ""
}

// oneLine trims a server-supplied text for an error message or a status
// line: one line, no control characters (no terminal escapes), at most 200
// bytes.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Current returns the usable record of server and resource, refreshing an
// expired token first. The refresh happens under the store lock and
// re-reads the file, so two processes refresh once between them. nil when
// there is no usable token.
func (s *Store) Current(ctx context.Context, hc *http.Client, server, resource string, now func() time.Time) (*Record, error) {
	rec, err := s.Load(server, resource)
	if unusable(err) {
		// Corrupt or sealed under another key: signed out until the next
		// sign-in replaces the file.
		return nil, nil
	}
	if err != nil || rec.Fresh(now()) {
		return rec, err
	}
	if rec == nil || rec.RefreshToken == "" {
		if rec.Valid(now()) {
			return rec, nil
		}
		return nil, nil
	}
	next, err := s.refresh(ctx, hc, server, resource, rec.AccessToken, now)
	if next == nil && rec.Valid(now()) {
		// The refresh failed but the token has not expired yet: use it
		// while it lasts.
		return rec, nil
	}
	return next, err
}

// refresh replaces a token the server rejected or that expired; stale is
// the access token seen, so a token another process already replaced is
// used instead of refreshed again.
func (s *Store) refresh(ctx context.Context, hc *http.Client, server, resource, stale string, now func() time.Time) (*Record, error) {
	var out *Record
	_, err := s.Update(server, resource, func(cur *Record) (*Record, error) {
		if cur == nil || cur.RefreshToken == "" {
			return nil, nil
		}
		if cur.AccessToken != stale && cur.Fresh(now()) {
			out = cur
			return nil, nil
		}
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {cur.RefreshToken}, "resource": {cur.Indicator}}
		tr, err := tokenRequest(ctx, hc, cur, form)
		if errors.Is(err, errInvalidGrant) {
			next := *cur
			next.AccessToken, next.RefreshToken, next.ExpiresAt = "", "", time.Time{}
			return &next, nil
		}
		if err != nil {
			return nil, err
		}
		next := *cur
		tr.apply(&next, cur.Scope, now())
		out = &next
		return &next, nil
	})
	return out, err
}
