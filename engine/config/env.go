package config

import (
	"os"
	"slices"
)

// passEnv is the only bridge environment a stdio child inherits (ENV-1).
var passEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR"}

// ChildEnv is the environment of e's stdio child (ENV-1): the passEnv
// variables that getenv reports non-empty, plus e.Env, which wins. Nothing
// else from the bridge's environment reaches the child, so its secrets stay
// put. The result is "KEY=value" pairs sorted by key; a nil getenv means
// os.Getenv.
func ChildEnv(e Entry, getenv func(string) string) []string {
	if getenv == nil {
		getenv = os.Getenv
	}
	m := make(map[string]string, len(passEnv)+len(e.Env))
	for _, k := range passEnv {
		if v := getenv(k); v != "" {
			m[k] = v
		}
	}
	for k, v := range e.Env {
		m[k] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return out
}
