package config

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"slices"
	"strings"
)

// parseEntry validates one raw entry and normalizes it (§10.2, CFG-4). A
// JSON null counts as an absent field. disabled is true for
// "disabled": true, and then nothing else is checked. ignored lists the
// present fields that do not apply to the entry's type. err is the short,
// actionable reason the entry is skipped.
func parseEntry(name string, raw any, fileDesc string) (e Entry, disabled bool, ignored []string, err error) {
	if name == "" {
		return e, false, nil, errors.New("the server name must not be empty")
	}
	o, ok := raw.(*object)
	if !ok {
		return e, false, nil, fmt.Errorf("the entry must be an object, not %s", kind(raw))
	}
	if v, ok := o.get("disabled"); ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return e, false, nil, fmt.Errorf(`"disabled" must be true or false, not %s`, kind(v))
		}
		if b {
			return e, true, nil, nil
		}
	}
	e.Name = name
	var typ string
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"type", &typ},
		{"command", &e.Command},
		{"cwd", &e.Cwd},
		{"url", &e.URL},
		{"description", &e.Description},
	} {
		if *f.dst, err = stringField(o, f.key); err != nil {
			return e, false, nil, err
		}
	}
	if e.Args, err = listField(o, "args"); err != nil {
		return e, false, nil, err
	}
	if e.Env, err = mapField(o, "env"); err != nil {
		return e, false, nil, err
	}
	for k := range e.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return e, false, nil, fmt.Errorf(`"env" name %q must be non-empty, without "=" or NUL`, k)
		}
	}
	if e.Headers, err = mapField(o, "headers"); err != nil {
		return e, false, nil, err
	}
	if e.Description == "" {
		e.Description = fileDesc
	}

	switch typ {
	case "":
		e.Type = TypeStdio
		if e.URL != "" {
			e.Type = TypeHTTP
		}
	case TypeStdio, TypeHTTP, TypeSSE:
		e.Type = typ
	case "streamable-http", "streamableHttp":
		e.Type = TypeHTTP
	default:
		return e, false, nil, fmt.Errorf(`"type" must be "stdio", "http" or "sse", not %q`, typ)
	}

	identity, err := stringField(o, "identity")
	if err != nil {
		return e, false, nil, err
	}
	switch identity {
	case "":
		identity = IdentityShared
	case IdentityShared, IdentityPrincipal:
	default:
		return e, false, nil, fmt.Errorf(`"identity" must be "shared" or "principal", not %q`, identity)
	}

	if e.Type == TypeStdio {
		if identity == IdentityPrincipal {
			return e, false, nil, errors.New(`"identity": "principal" needs an http or sse server: a stdio server has no per-user sign-in`)
		}
		if e.Command == "" {
			return e, false, nil, errors.New(`missing "command", required for a stdio server`)
		}
		if err := noNUL(e); err != nil {
			return e, false, nil, err
		}
		ignored = present(o, "url", "headers", "oauth")
		e.URL, e.Headers = "", nil
		return e, false, ignored, nil
	}
	if e.URL == "" {
		return e, false, nil, fmt.Errorf(`missing "url", required for an %s server`, e.Type)
	}
	if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return e, false, nil, fmt.Errorf(`"url" must be an http:// or https:// URL, not %q`, e.URL)
	}
	if e.OAuth, err = parseOAuth(o); err != nil {
		return e, false, nil, err
	}
	e.Identity = identity
	if e.Identity == IdentityPrincipal {
		for k := range e.Headers {
			if strings.EqualFold(k, "Authorization") {
				return e, false, nil, errors.New(`"identity": "principal" and a static "Authorization" header exclude each other: ` +
					`the header would send one credential for every user; remove one`)
			}
		}
	}
	ignored = present(o, "command", "args", "env", "cwd")
	e.Command, e.Args, e.Env, e.Cwd = "", nil, nil, ""
	return e, false, ignored, nil
}

// stringField returns the string at key, "" when absent or null.
func stringField(o *object, key string) (string, error) {
	v, ok := o.get(key)
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%q must be a string, not %s", key, kind(v))
	}
	return s, nil
}

// listField returns the list of strings at key, nil when absent, null or
// empty.
func listField(o *object, key string) ([]string, error) {
	v, ok := o.get(key)
	if !ok || v == nil {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%q must be a list of strings, not %s", key, kind(v))
	}
	var out []string
	for i, item := range a {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("%q must be a list of strings; %s[%d] is %s", key, key, i, kind(item))
		}
		out = append(out, s)
	}
	return out, nil
}

// mapField returns the string-to-string object at key, nil when absent, null
// or empty. A key given twice keeps its last value.
func mapField(o *object, key string) (map[string]string, error) {
	v, ok := o.get(key)
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("%q must be an object of strings, not %s", key, kind(v))
	}
	var out map[string]string
	for i, k := range m.keys {
		s, ok := m.vals[i].(string)
		if !ok {
			return nil, fmt.Errorf("%q must be an object of strings; %s[%q] is %s", key, key, k, kind(m.vals[i]))
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = s
	}
	return out, nil
}

// present lists which of keys o holds with a non-null value, quoted.
func present(o *object, keys ...string) []string {
	var out []string
	for _, k := range keys {
		if v, ok := o.get(k); ok && v != nil {
			out = append(out, fmt.Sprintf("%q", k))
		}
	}
	return out
}

// noNUL rejects a NUL byte in what becomes a stdio child's argv, env or dir:
// the kernel cannot take one, so the entry could never start.
func noNUL(e Entry) error {
	if strings.ContainsRune(e.Command, 0) {
		return errors.New(`"command" must not contain NUL bytes`)
	}
	if strings.ContainsRune(e.Cwd, 0) {
		return errors.New(`"cwd" must not contain NUL bytes`)
	}
	for i, a := range e.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf(`"args" must not contain NUL bytes; args[%d] does`, i)
		}
	}
	for k, v := range e.Env {
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf(`"env" must not contain NUL bytes; env[%q] does`, k)
		}
	}
	return nil
}

// hashEntry is the config hash of e (CFG-4): SHA-256 over an unambiguous
// encoding (length-prefixed strings, maps in sorted key order) of type,
// command, args, env, cwd, url and headers. Equal normalized entries hash
// equally whatever their map order; any changed field changes the input.
func hashEntry(e Entry) string {
	h := sha256.New()
	writeString(h, "bridge-config-v1")
	writeString(h, e.Type)
	writeString(h, e.Command)
	writeList(h, e.Args)
	writeMap(h, e.Env)
	writeString(h, e.Cwd)
	writeString(h, e.URL)
	writeMap(h, e.Headers)
	if e.Identity == IdentityPrincipal {
		// Only then: every shared entry keeps the hash (and the disk
		// catalog) it had before identities existed.
		writeString(h, e.Identity)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeLen(h hash.Hash, n int) {
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutUvarint(b[:], uint64(n))])
}

func writeString(h hash.Hash, s string) {
	writeLen(h, len(s))
	h.Write([]byte(s))
}

func writeList(h hash.Hash, l []string) {
	writeLen(h, len(l))
	for _, s := range l {
		writeString(h, s)
	}
}

func writeMap(h hash.Hash, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	writeLen(h, len(keys))
	for _, k := range keys {
		writeString(h, k)
		writeString(h, m[k])
	}
}
