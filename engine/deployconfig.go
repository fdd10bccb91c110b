package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bridge-mcp/bridge/engine/config"
)

// ServersFile is the name the servers get in a deployment's config
// directory (the ConfigMap `bridge kubernetes manifests` prints).
const ServersFile = "servers.json"

// maxDeployFile caps each file given to DeployFiles: a ConfigMap holds at
// most 1 MiB in all.
const maxDeployFile = 1 << 20

// DeployFiles reads the servers file (an "mcpServers" file, as in
// MCP_BRIDGE_CONFIG_DIR) and the policy file of `bridge kubernetes
// manifests`, either of which may be "", and checks them as the bridge in
// the pod will load them: a file with a problem is an error naming it,
// since the pod would start without those servers or refuse every call.
// Commands are not looked up here: they run in the bridge's image. The
// result maps ConfigMap keys (servers.json, bridge.policy) to contents.
//
// A server with "identity": "principal" needs publicURL (--public-url), the
// https address browsers come back to: without it the pod's bridge serve
// would refuse to start.
func DeployFiles(serversPath, policyPath, publicURL string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, f := range []struct{ flag, path, key string }{
		{"--servers", serversPath, ServersFile}, {"--policy", policyPath, PolicyFile},
	} {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		if err == nil && st.Size() > maxDeployFile {
			err = fmt.Errorf("%s is over 1 MiB, the most a ConfigMap holds", f.path)
		}
		var data []byte
		if err == nil {
			data, err = os.ReadFile(f.path)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.flag, err)
		}
		files[f.key] = data
	}
	dir, err := os.MkdirTemp("", "bridge-deploy-")
	if err != nil {
		return nil, fmt.Errorf("config check: %w", err)
	}
	defer os.RemoveAll(dir)
	for key, data := range files {
		if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
			return nil, fmt.Errorf("config check: %w", err)
		}
	}
	if _, ok := files[ServersFile]; ok {
		set := config.Load(config.Options{Dir: dir, Sources: []string{config.SourceMCPs},
			LookPath: func(name string) (string, error) { return name, nil }})
		if len(set.Problems) > 0 {
			p := set.Problems[0]
			p.File = serversPath
			return nil, fmt.Errorf("--servers: %s", p)
		}
		var own []string
		for _, en := range set.Entries {
			if en.Identity == config.IdentityPrincipal {
				own = append(own, en.Name)
			}
		}
		if len(own) > 0 && publicURL == "" {
			return nil, fmt.Errorf("--servers: %s set \"identity\": \"principal\": give --public-url https://… (where browsers reach the bridge's Service, through your ingress), "+
				"which each principal's sign-in comes back to", strings.Join(own, ", "))
		}
	}
	if pol := LoadPolicy(dir); pol != nil && pol.Err != nil {
		return nil, fmt.Errorf("--policy: %s: %w", policyPath, pol.Err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	return files, nil
}
