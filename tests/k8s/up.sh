#!/usr/bin/env bash
# up.sh: a real single-node Kubernetes cluster on this machine (Debian 12, root) for the kubernetes backend's
# tests, from Debian packages and the Go module proxy only (no registry, no release binaries):
#   apt:  containerd, runc, containernetworking-plugins, openssl, curl, jq, iproute2
#   Go:   kube-apiserver and kubelet (tools/k8s pins k8s.io/kubernetes), etcd (tools/etcd), and this repository's
#         pause and mkimage helpers
# Components started: etcd, kube-apiserver, containerd, kubelet. No scheduler, controller-manager, kube-proxy or DNS:
# pods name their node (MCP_BRIDGE_K8S_NODE_NAME=localhost), and up.sh creates the objects the controllers would.
#
# Everything lives under $K8S_HOME (default ~/.cache/bridge-k8s):
#   bin/    built binaries, reused while their stamp matches (the Go build cache makes a rebuild ~40 s)
#   images/ OCI archives (pause, the sandbox image saved from podman)
#   state/  runtime state, pids, logs, certs: removed by down.sh
# Knobs: K8S_HOME, IMAGE (the sandbox image, from podman), NODE_NAME (localhost), SKIP_APT=1, BUILD_PREFIX,
# BUILD_ONLY=1 (build, then exit).
#
# Pod network: containerd wants an eth0 with an IP in every pod, and sandboxes must reach no network. Each pod gets a
# macvlan in private mode on k8snul0, a bridge with no ports and no address: private mode keeps pods from each other,
# a macvlan never reaches its parent's host stack, and the pod has one on-link route and no default route.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
K8S_HOME="${K8S_HOME:-$HOME/.cache/bridge-k8s}"
IMAGE="${IMAGE:-localhost/bridge-python:latest}"
K8S_VERSION="${K8S_VERSION:-1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
NODE_NAME="${NODE_NAME:-localhost}"
BUILD_PREFIX="${BUILD_PREFIX:-}"
BIN="$K8S_HOME/bin"
IMG="$K8S_HOME/images"
ST="$K8S_HOME/state"
PKI="$ST/pki"
LOGS="$ST/logs"
PIDS="$ST/pids"
ETCD_PORT=2379 ETCD_PEER_PORT=2380 API_PORT=6443
CTR_SOCK="$ST/containerd/containerd.sock"
API="https://127.0.0.1:$API_PORT"
TIMINGS="$K8S_HOME/timings.txt"

mkdir -p "$BIN" "$IMG" "$ST" "$PKI" "$LOGS" "$PIDS"
: >>"$TIMINGS"
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
record() { echo "$(date -u +%FT%TZ) $1 $2" | tee -a "$TIMINGS"; }
log() { echo "[up] $*"; }
die() { echo "[up] ERROR: $*" >&2; exit 1; }

if [[ "${BUILD_ONLY:-0}" != 1 && -e "$PIDS/kubelet.pid" ]] && kill -0 "$(cat "$PIDS/kubelet.pid")" 2>/dev/null; then
  die "a cluster from $K8S_HOME is already running; run down.sh first"
fi

# ---------------------------------------------------------------- 1. packages
T0=$(now)
if [[ "${SKIP_APT:-0}" != 1 ]]; then
  pkgs=(containerd runc containernetworking-plugins openssl curl jq iproute2 ca-certificates)
  missing=()
  for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Debian's containerd ships a systemd unit only; nothing is started
    # here (no systemd as PID 1, and policy-rc.d forbids it where present).
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  record apt "$(elapsed "$T0")s"
fi

# ---------------------------------------------------------------- 2. builds
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath"
build() { # name stamp workdir pkg [ldflags]
  local name=$1 stamp=$2 dir=$3 pkg=$4 ld=${5:-}
  if [[ -x "$BIN/$name" && "$(cat "$BIN/$name.stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "$name: up to date ($stamp)"; return
  fi
  log "building $name ($stamp)"
  local t=$(now)
  # module download first (network only), so that the build figure is compile+link
  (cd "$dir" && go list -deps "$pkg" >/dev/null)
  record "download-$name" "$(elapsed "$t")s"
  t=$(now)
  (cd "$dir" && $BUILD_PREFIX go build -ldflags "-s -w $ld" -o "$BIN/$name" "$pkg")
  echo "$stamp" >"$BIN/$name.stamp"
  record "build-$name" "$(elapsed "$t")s size=$(stat -c %s "$BIN/$name")"
}
V="v$K8S_VERSION" MINOR="${K8S_VERSION#1.}" MINOR="${MINOR%%.*}"
KLD=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  KLD+=" -X $p.gitVersion=$V -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
# The pinned build modules. k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces the k8s.io/* staging
# modules with ./staging paths); tools/k8s/go.mod requires it and replaces each staging module with the matching
# v0.X.Y. kubelet 1.35 and later refuse cgroup v1 hosts, so 1.34; etcd 3.4 (Debian's) missed watch events with it.
grep -qE "k8s.io/kubernetes $V\b" "$HERE/tools/k8s/go.mod" \
  || die "tools/k8s/go.mod does not pin $V"
TB=$(now)
build kube-apiserver "$V" "$HERE/tools/k8s" k8s.io/kubernetes/cmd/kube-apiserver "$KLD"
build kubelet "$V" "$HERE/tools/k8s" k8s.io/kubernetes/cmd/kubelet "$KLD"
build etcd "$ETCD_VERSION" "$HERE/tools/etcd" go.etcd.io/etcd/server/v3
HSTAMP="$(cat "$HERE"/pause/*.go "$HERE"/mkimage/*.go | sha256sum | cut -c1-16)"
build pause "$HSTAMP" "$REPO" ./tests/k8s/pause
build mkimage "$HSTAMP" "$REPO" ./tests/k8s/mkimage
record builds-total "$(elapsed "$TB")s"
# BUILD_ONLY=1 stops here: task k8s:build:bg builds ahead, in the background, what a later up.sh then finds up to date.
[[ "${BUILD_ONLY:-0}" == 1 ]] && exit 0

# ---------------------------------------------------------------- 3. images (no registry)
if [[ ! -s "$IMG/pause.tar" || "$IMG/pause.tar" -ot "$BIN/pause" ]]; then
  "$BIN/mkimage" -name localhost/pause:k8s -file "$BIN/pause:/pause:0755" -entrypoint /pause -user 65535:65535 -o "$IMG/pause.tar"
fi
# The sandbox image comes from podman (the bridge builds it there: `go tool task image`), saved again only when its
# id changed.
IID=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null) || die "podman has no $IMAGE (run \`go tool task image\`)"
if [[ ! -s "$IMG/sandbox.tar" || "$(cat "$IMG/sandbox.id" 2>/dev/null)" != "$IID" ]]; then
  podman save --format docker-archive -o "$IMG/sandbox.tar.new" "$IMAGE" >/dev/null && mv "$IMG/sandbox.tar.new" "$IMG/sandbox.tar"
  echo "$IID" >"$IMG/sandbox.id"
fi

# ---------------------------------------------------------------- 4. PKI + kubeconfigs
TC=$(now)
mkdir -p "$PKI"
cert() { # name subject [san]
  local n=$1 subj=$2 san=${3:-}
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/$n.key" \
    -subj "$subj" -out "$PKI/$n.csr" 2>/dev/null
  local ext="$PKI/$n.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n "$san" ]]; then echo "extendedKeyUsage=serverAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi; } >"$ext"
  openssl x509 -req -in "$PKI/$n.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3 -extfile "$ext" -out "$PKI/$n.crt" 2>/dev/null
  rm -f "$PKI/$n.csr" "$ext"
}
if [[ ! -s "$PKI/ca.crt" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3 \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=bridge-local-ca" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.0.0.1"
  cert admin "/O=system:masters/CN=admin"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
fi
kubeconfig() { # file user
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$API", certificate-authority: "$PKI/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$PKI/$2.crt", client-key: "$PKI/$2.key"}
contexts:
- name: local
  context: {cluster: local, user: $2, namespace: sandboxes}
current-context: local
EOF
}
kubeconfig "$ST/admin.kubeconfig" admin
kubeconfig "$ST/kubelet.kubeconfig" kubelet
KCURL=(curl -sS --fail --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
record pki "$(elapsed "$TC")s"

# ---------------------------------------------------------------- 5. start daemons
start() { # name logfile cmd...
  local name=$1; shift
  log "starting $name"
  setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name.pid"
}
waitfor() { # what timeout_s cmd...
  local what=$1 to=$2; shift 2
  local t=$(now)
  for ((i = 0; i < to * 10; i++)); do
    if "$@" >/dev/null 2>&1; then record "ready-$what" "$(elapsed "$t")s"; return 0; fi
    sleep 0.1
  done
  die "$what not ready after ${to}s (see $LOGS)"
}
alive() { kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null || { tail -30 "$LOGS/$1.log"; die "$1 exited"; }; }

# kubelet rewrites these kernel tunables (protectKernelDefaults=false); save them
# so that down.sh can put them back.
if [[ ! -s "$ST/sysctl.orig" ]]; then
  sysctl -e vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes >"$ST/sysctl.orig"
fi
# Paths outside $K8S_HOME that kubelet/containerd create whatever their config
# says (device-plugin socket, libcni cache, netns mounts, runc state, log links):
# remember which did not exist yet, so that down.sh removes only those.
if [[ ! -e "$ST/created-paths" ]]; then
  for d in /var/lib/kubelet /var/lib/cni /var/run/netns /var/log/containers /run/containerd \
           /run/containerd/runc /run/containerd/runc/k8s.io /run/containerd/fifo /run/containerd/s; do
    [[ -e "$d" ]] || echo "$d"
  done >"$ST/created-paths"
fi
[[ -e "$ST/netns.before" ]] || ls /var/run/netns >"$ST/netns.before" 2>/dev/null || true

# etcd 3.6: skip fsync (a throw-away CI cluster; saves seconds on slow disks).
ETCD_EXTRA=(--log-level=warn --unsafe-no-fsync)
TS=$(now)
start etcd "$BIN/etcd" --name=k8s --data-dir="$ST/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="k8s=http://127.0.0.1:$ETCD_PEER_PORT" "${ETCD_EXTRA[@]}"

mkdir -p "$ST/containerd" "$ST/cni/net.d" "$ST/cni/ipam"
cat >"$ST/containerd/config.toml" <<EOF
version = 2
root = "$ST/containerd/root"
state = "$ST/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CTR_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$ST/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:k8s"
  enable_selinux = false
  # This machine's root lacks CAP_SYS_RESOURCE, so runc/crun cannot lower
  # oom_score_adj (containerd gives sandboxes -998, kubelet Guaranteed pods -997):
  # "write to /proc/self/oom_score_adj: Permission denied". Clamp to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ST/cni/net.d"
EOF
# Pod network: see the header. k8snul0 must exist before the first pod.
ip link show k8snul0 >/dev/null 2>&1 || { ip link add k8snul0 type bridge && ip link set k8snul0 up; }
cat >"$ST/cni/net.d/10-sbx.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "sbx", "plugins": [
  {"type": "macvlan", "master": "k8snul0", "mode": "private",
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.250.0.0/24"}]], "dataDir": "$ST/cni/ipam"}}]}
EOF
start containerd /usr/bin/containerd --config "$ST/containerd/config.toml" --log-level warn

waitfor etcd 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
alive etcd

start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --secure-port=$API_PORT \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --allow-privileged=false \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=Hostname,InternalIP \
  --endpoint-reconciler-type=none \
  --profiling=false --v=1

waitfor containerd 60 ctr --address "$CTR_SOCK" version
alive containerd
TI=$(now)
for img in pause sandbox; do
  ctr --address "$CTR_SOCK" -n k8s.io images import "$IMG/$img.tar" >/dev/null || die "import $img.tar"
done
record image-import "$(elapsed "$TI")s"

waitfor kube-apiserver 120 "${KCURL[@]}" "$API/readyz"
alive kube-apiserver

mkdir -p "$ST/kubelet" "$ST/pod-logs"
# The bridge's own seccomp profile, installed as a Localhost profile on the node (kubelet reads it from
# <root-dir>/seccomp): test:k8s runs the sandboxes with MCP_BRIDGE_K8S_SECCOMP_PROFILE=bridge/sandbox.json.
mkdir -p "$ST/kubelet/seccomp/bridge"
(cd "$REPO" && go run ./cmd/bridge kubernetes seccomp) >"$ST/kubelet/seccomp/bridge/sandbox.json" || die "seccomp profile"
cat >"$ST/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: "unix://$CTR_SOCK"
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
# The pids limit of a pod is the kubelet's, not the pod's: MCP_BRIDGE_PIDS's default.
podPidsLimit: 128
podLogsDir: "$ST/pod-logs"
volumePluginDir: "$ST/kubelet/volume-plugins"
registerNode: true
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%", imagefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
start kubelet "$BIN/kubelet" --config="$ST/kubelet/config.yaml" --kubeconfig="$ST/kubelet.kubeconfig" \
  --root-dir="$ST/kubelet" --cert-dir="$ST/kubelet/pki" --hostname-override="$NODE_NAME" --v=1

node_ready() {
  "${KCURL[@]}" "$API/api/v1/nodes/$NODE_NAME" |
    jq -e '.status.conditions[] | select(.type=="Ready") | .status=="True"' | grep -q true
}
waitfor node 120 node_ready
alive kubelet
record cluster-start "$(elapsed "$TS")s (etcd start -> node Ready)"

# ---------------------------------------------------------------- 6. objects the missing controllers would make
post() { "${KCURL[@]}" -o /dev/null -H 'Content-Type: application/json' -X POST "$API$1" -d "$2" 2>/dev/null || true; }
post /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"sandboxes","labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/warn":"restricted"}}}'
for ns in default sandboxes; do
  post "/api/v1/namespaces/$ns/serviceaccounts" '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"},"automountServiceAccountToken":false}'
done

record up-total "$(elapsed "$T0")s"
log "cluster up: API $API, kubeconfig $ST/admin.kubeconfig, node $NODE_NAME"
