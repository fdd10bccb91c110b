package kube

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

//go:embed manifests/bridge.yaml
var manifests string

// Deployment describes the team service `bridge kubernetes manifests`
// prints. The zero value of each field but Namespace and the images takes
// the default named on it.
type Deployment struct {
	Namespace    string
	Image        string // the bridge's own image (bridge image build --bridge)
	SandboxImage string
	// Files are the ConfigMap's files by name (servers.json, bridge.policy),
	// mounted at /etc/bridge, the bridge's MCP_BRIDGE_CONFIG_DIR. Nil
	// gives an empty servers.json.
	Files map[string][]byte
	// StorageClass is the state volume's class; "" is the cluster's
	// default class.
	StorageClass string
	// StorageSize is the state volume's size; "" is DefaultStorageSize.
	StorageSize string
	// Replicas is the Deployment's; 0 is 1. From 2 on, one replica serves
	// and the others stand by (bridge serve --leader-elect), at most
	// MaxReplicas.
	Replicas int
	// VolumeAccess is the state volume's access mode, ReadWriteOnce
	// (""; the replicas then share one node) or ReadWriteMany (they
	// spread over nodes).
	VolumeAccess string
	// MetricsPrincipals may read /metrics; nil is DefaultMetricsPrincipal:
	// /metrics names every principal, so no team member's token reads it.
	MetricsPrincipals []string
	// SeccompProfile is the sandbox pods' Localhost profile, relative to
	// the kubelet's seccomp directory; "" leaves them RuntimeDefault.
	SeccompProfile string
	// PublicURL is passed to bridge serve as --public-url: the https
	// address browsers reach the Service at, for principals' own sign-ins
	// ("identity": "principal"); "" passes none.
	PublicURL string
}

// Defaults of Deployment.
const (
	// DefaultStorageSize holds MCP_BRIDGE_SNAPSHOT_TOTAL's 8 GiB of session
	// snapshots, with room for memory, saved tools, catalogs and the npm
	// cache.
	DefaultStorageSize = "10Gi"
	// DefaultSeccompProfile is where the README installs `bridge
	// kubernetes seccomp` on each node.
	DefaultSeccompProfile = "bridge/sandbox.json"
	// DefaultMetricsPrincipal is the principal the manifests let read
	// /metrics when none is given: the Prometheus scraper's line in the
	// tokens.
	DefaultMetricsPrincipal = "prometheus"
	// MaxReplicas bounds Deployment.Replicas: one leader and standbys, of
	// which a second adds nothing but a ready spare for the first.
	MaxReplicas = 3
	// ReadWriteOnce and ReadWriteMany are the state volume's access modes.
	ReadWriteOnce = "ReadWriteOnce"
	ReadWriteMany = "ReadWriteMany"
)

// Names the manifests take as given.
var (
	namespaceRe   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	subdomainRe   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	seccompPathRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`)
	configKeyRe   = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)
)

// Validate checks what the manifests cannot carry as given; each error is
// one line naming the field.
func (d Deployment) Validate() error {
	if !namespaceRe.MatchString(d.Namespace) {
		return fmt.Errorf("namespace: %q: want a DNS label such as bridge", d.Namespace)
	}
	if d.Replicas < 0 || d.Replicas > MaxReplicas {
		return fmt.Errorf("replicas: %d: want 1, or 2 to %d (one leader serves, the others stand by)", d.Replicas, MaxReplicas)
	}
	if d.VolumeAccess != "" && d.VolumeAccess != ReadWriteOnce && d.VolumeAccess != ReadWriteMany {
		return fmt.Errorf("volume access: %q: want %s (the replicas share one node) or %s (the storage class must offer it)",
			d.VolumeAccess, ReadWriteOnce, ReadWriteMany)
	}
	if d.StorageSize != "" {
		q, err := resource.ParseQuantity(d.StorageSize)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("storage size: %q: want a quantity such as 10Gi", d.StorageSize)
		}
	}
	if d.StorageClass != "" && !subdomainRe.MatchString(d.StorageClass) {
		return fmt.Errorf("storage class: %q: want a class name such as standard", d.StorageClass)
	}
	if d.PublicURL != "" {
		u, err := url.Parse(d.PublicURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.ContainsAny(d.PublicURL, "\"\\ \n") {
			return fmt.Errorf("public url: %q: want the https address browsers reach the bridge at, e.g. https://bridge.example.com", d.PublicURL)
		}
	}
	if d.SeccompProfile != "" && !seccompPathRe.MatchString(d.SeccompProfile) {
		return fmt.Errorf("seccomp profile: %q: want a path relative to the kubelet's seccomp directory, e.g. %s", d.SeccompProfile, DefaultSeccompProfile)
	}
	total := 0
	for name, data := range d.Files {
		if !configKeyRe.MatchString(name) {
			return fmt.Errorf("config file: %q: not a ConfigMap key", name)
		}
		total += len(data)
	}
	if total > maxConfigMap {
		return errors.New("config files: over 1 MiB, the most a ConfigMap holds")
	}
	return nil
}

// maxConfigMap is the API server's cap on a ConfigMap's data.
const maxConfigMap = 1 << 20

// Manifests is the YAML of d: the Namespace at the restricted Pod Security
// level, the ServiceAccount, Role and RoleBinding the backend needs, the
// deny-all NetworkPolicy of the sandbox pods, the ConfigMap of servers and
// policy, the state PersistentVolumeClaim, the Deployment serving HTTP
// with its probes, and its Service. d must pass Validate.
func Manifests(d Deployment) string {
	if len(d.MetricsPrincipals) == 0 {
		d.MetricsPrincipals = []string{DefaultMetricsPrincipal}
	}
	if d.StorageSize == "" {
		d.StorageSize = DefaultStorageSize
	}
	if d.Replicas == 0 {
		d.Replicas = 1
	}
	var args strings.Builder
	for _, p := range d.MetricsPrincipals {
		fmt.Fprintf(&args, ", --metrics-principal, %q", p)
	}
	if d.PublicURL != "" {
		fmt.Fprintf(&args, ", --public-url, %q", d.PublicURL)
	}
	class := ""
	if d.StorageClass != "" {
		class = "  storageClassName: " + d.StorageClass + "\n"
	}
	seccompEnv, seccompNote := "", "nothing: the sandbox pods run with RuntimeDefault, which lets them open AF_INET sockets (docs/SECURITY.md).\n"
	if d.SeccompProfile != "" {
		seccompEnv = "            # The sandbox pods' Localhost seccomp profile: `bridge kubernetes seccomp`, saved on each node.\n" +
			"            - name: MCP_BRIDGE_K8S_SECCOMP_PROFILE\n              value: " + d.SeccompProfile + "\n"
		seccompNote = "the sandbox pods' seccomp profile, which refuses them network sockets:\n" +
			"#   bridge kubernetes seccomp > /var/lib/kubelet/seccomp/" + d.SeccompProfile + "\n"
	}
	if d.VolumeAccess == "" {
		d.VolumeAccess = ReadWriteOnce
	}
	leaderArgs, affinity := "", ""
	if d.Replicas > 1 {
		leaderArgs = ", --leader-elect"
		affinity = affinityRWO
		if d.VolumeAccess == ReadWriteMany {
			affinity = affinityRWX
		}
	}
	return strings.NewReplacer(
		"${NAMESPACE}", d.Namespace, "${BRIDGE_IMAGE}", d.Image, "${SANDBOX_IMAGE}", d.SandboxImage,
		"${METRICS_ARGS}", args.String(), "${METRICS_PRINCIPAL}", d.MetricsPrincipals[0],
		"${CONFIG_DATA}", configData(d.Files), "${STORAGE_CLASS}", class, "${STORAGE_SIZE}", d.StorageSize,
		"${REPLICAS}", strconv.Itoa(d.Replicas), "${LEADER_ARGS}", leaderArgs, "${AFFINITY}", affinity,
		"${VOLUME_ACCESS}", d.VolumeAccess, "${SECCOMP_ENV}", seccompEnv, "${SECCOMP_NOTE}", seccompNote,
	).Replace(manifests)
}

// The pod spec's affinity with standbys: a ReadWriteOnce volume mounts on
// one node at a time, so every replica runs where the first did; a
// ReadWriteMany one lets them spread, so losing a node leaves a standby.
const (
	affinityRWO = `      # The state volume is ReadWriteOnce, which one node at a time mounts: every replica runs on the first one's node.
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels:
                  app.kubernetes.io/name: bridge
              topologyKey: kubernetes.io/hostname
`
	affinityRWX = `      # The state volume is ReadWriteMany: the replicas spread over nodes where they can, so losing one leaves a standby.
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                labelSelector:
                  matchLabels:
                    app.kubernetes.io/name: bridge
                topologyKey: kubernetes.io/hostname
`
)

// configData is the ConfigMap's data block: each file as a literal block
// scalar a user can edit in place, or a JSON-quoted string (valid YAML)
// when a block scalar cannot hold it exactly (a leading space, a carriage
// return or control characters, no final newline or several).
func configData(files map[string][]byte) string {
	if files == nil {
		files = map[string][]byte{"servers.json": []byte("{\"mcpServers\": {}}\n")}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		s := string(files[name])
		if blockSafe(s) {
			fmt.Fprintf(&b, "  %s: |\n", name)
			for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				if line == "" {
					b.WriteString("\n")
					continue
				}
				b.WriteString("    " + line + "\n")
			}
			continue
		}
		q, _ := json.Marshal(s) // a string: cannot fail
		fmt.Fprintf(&b, "  %s: %s\n", name, q)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// blockSafe reports whether a "|" block scalar holds s exactly: one final
// newline, no leading space or tab on the first line, no trailing white
// space on a line, and printable characters and tabs only.
func blockSafe(s string) bool {
	if s == "" || !strings.HasSuffix(s, "\n") || strings.HasSuffix(s, "\n\n") || s[0] == ' ' || s[0] == '\t' {
		return false
	}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if strings.TrimRight(line, " \t") != line {
			return false
		}
		for _, r := range line {
			if r == '\t' {
				continue
			}
			if r < 0x20 || r == 0x7f || r == 0xfeff || (r >= 0x80 && r < 0xa0) {
				return false
			}
		}
	}
	return true
}
