package search

import (
	"fmt"
	"strings"
)

// Vocabulary of the synthetic catalog. Changing it changes Synthetic's
// output, and so every benchmark built on it.
var (
	synthServers = []string{
		"github", "gitlab", "slack", "jira", "confluence", "notion", "linear",
		"postgres", "mysql", "redis", "mongodb", "kubernetes", "docker",
		"aws-s3", "gcp-storage", "stripe", "sentry", "grafana", "prometheus",
		"google-drive", "google-calendar", "gmail", "figma", "airtable",
		"elasticsearch",
	}
	synthVerbs = []string{
		"get", "list", "create", "update", "delete", "search", "find", "read",
		"write", "fetch", "send", "upload", "download", "move", "copy",
		"archive", "restore", "export", "import", "sync", "query", "describe",
		"run", "cancel", "merge", "approve", "close", "open", "add", "remove",
	}
	synthNouns = []string{
		"issue", "pull request", "comment", "file", "directory", "branch",
		"commit", "message", "channel", "user", "team", "project", "page",
		"database", "table", "record", "document", "bucket", "object", "pod",
		"deployment", "container", "image", "log", "metric", "alert",
		"dashboard", "event", "invoice", "payment", "customer", "calendar",
		"email", "label", "milestone", "release", "tag", "workflow", "job",
		"secret", "snapshot", "index", "schema", "webhook", "thread",
	}
	synthQualifiers = []string{
		"", "", "", "by id", "in bulk", "metadata", "permissions", "history",
		"status", "details", "contents", "summary", "settings", "version",
	}
	synthClauses = []string{
		"Returns a paginated JSON list.",
		"Requires write access to the workspace.",
		"Supports filtering by date range and owner.",
		"The result includes timestamps and the author.",
		"Use this before making changes to check the current state.",
		"Fails if the target does not exist.",
		"Large results are truncated; pass a cursor to continue.",
		"Only works within the configured organization.",
		"Accepts an optional limit and sort order.",
		"Idempotent: calling it twice has the same effect as once.",
	}
)

// splitmix64 is a tiny deterministic generator, so Synthetic does not depend
// on math/rand's stream staying the same across Go releases.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *splitmix64) pick(xs []string) string { return xs[s.next()%uint64(len(xs))] }

// Synthetic returns a deterministic catalog of n tools spread over up to 25
// servers, for benchmarks: docs are in server order, then tool order, as
// NewIndex expects. Tool names mix snake_case, kebab-case and camelCase by
// server, and are unique within their server. The same n always gives the
// same docs.
func Synthetic(n int) []Doc {
	if n <= 0 {
		return nil
	}
	rng := splitmix64(1)
	servers := min(n, len(synthServers))
	docs := make([]Doc, 0, n)
	for s := range servers {
		server := synthServers[s]
		count := n / servers
		if s < n%servers {
			count++
		}
		used := map[string]int{}
		for range count {
			verb, noun, qual := rng.pick(synthVerbs), rng.pick(synthNouns), rng.pick(synthQualifiers)
			words := strings.Fields(verb + " " + noun + " " + qual)
			base := joinName(words, s%3)
			tool := base
			if k := used[base]; k > 0 {
				tool = joinName(append(words, fmt.Sprint(k+1)), s%3)
			}
			used[base]++
			desc := fmt.Sprintf("%s %s %s%s in %s. %s", capitalize(verb), article(noun), noun,
				qualPhrase(qual), server, rng.pick(synthClauses))
			docs = append(docs, Doc{
				Server:      server,
				ServerAlias: strings.ReplaceAll(server, "-", "_"),
				Tool:        tool,
				ToolAlias:   strings.ToLower(strings.ReplaceAll(tool, "-", "_")),
				Description: desc,
			})
		}
	}
	return docs
}

// joinName joins words as snake_case (style 0), kebab-case (1) or camelCase (2).
func joinName(words []string, style int) string {
	switch style {
	case 0:
		return strings.Join(words, "_")
	case 1:
		return strings.Join(words, "-")
	default:
		var sb strings.Builder
		for i, w := range words {
			if i == 0 {
				sb.WriteString(w)
			} else {
				sb.WriteString(capitalize(w))
			}
		}
		return sb.String()
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func article(noun string) string {
	if strings.ContainsRune("aeio", rune(noun[0])) {
		return "an"
	}
	return "a"
}

func qualPhrase(q string) string {
	if q == "" {
		return ""
	}
	return " (" + q + ")"
}
