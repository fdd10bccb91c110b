#!/usr/bin/env bash
# up.sh: a real single-node Kubernetes cluster on this machine (Debian 12, root) for the kubernetes backend's
# tests and for running what users run on one (Deployments, Services, ServiceAccount tokens, PVCs), from Debian
# packages and the Go module proxy only (no registry, no release binaries):
#   apt:  containerd, runc, containernetworking-plugins, openssl, curl, jq, iproute2, iptables
#   Go:   kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy (tools/k8s pins
#         k8s.io/kubernetes), etcd (tools/etcd), and this repository's pause and mkimage helpers
# Components started: etcd, kube-apiserver, containerd, kube-controller-manager (the default controllers: Deployment,
# ReplicaSet, endpoints/EndpointSlices, namespace, garbage collector, PV binder, ServiceAccount and its tokens, the
# kube-root-ca.crt ConfigMaps, CSR signing...), kube-scheduler, kubelet, kube-proxy (iptables mode). Each has its own
# client certificate (system:kube-controller-manager, system:kube-scheduler, system:node:localhost, system:kube-proxy:
# the users the built-in RBAC roles name), leader election is off (one of each), and every port but the API server's
# binds 127.0.0.1. No DNS (CoreDNS is not built; pods use $KUBERNETES_SERVICE_HOST, an IP). Node name: localhost.
#
# Everything lives under $K8S_HOME (default ~/.cache/bridge-k8s):
#   bin/    built binaries, reused while their stamp matches (the Go build cache makes a rebuild ~40 s)
#   images/ OCI archives (pause, the sandbox image saved from podman, and the bridge's own image when podman has it)
#   state/  runtime state, pids, logs, certs, the CNI config and IPAM state: removed by down.sh
# Knobs: K8S_HOME, IMAGE (the sandbox image, from podman), BRIDGE_IMAGE (the bridge's image, imported when podman has
# it), NODE_NAME (localhost), SKIP_APT=1, BUILD_PREFIX, BUILD_ONLY=1 (build, then exit).
#
# Pod network (routed; Debian's containernetworking-plugins): the CNI `bridge` plugin puts each pod's veth on k8sbr0,
# which holds the gateway 10.250.0.1/24 (isGateway); host-local hands out 10.250.0.0/24. Pods get the on-link /24 and
# one route, to the Service range 10.0.0.0/24 via 10.250.0.1, and no default route; there is no masquerading
# (ipMasq false): pods reach the host (the API server, which binds 10.250.0.1, also as 10.0.0.1:443 through
# kube-proxy's DNAT) and each other, not the internet. The host reaches pod IPs over k8sbr0 (kubelet's httpGet probes).
# Keeping the bridge's sandbox pods off this network is the sandbox seccomp profile's job (it refuses AF_INET and
# AF_INET6 sockets on this backend), not the pod network's. No portmap plugin: hostPort is not needed here, and it
# would leave CNI-HOSTPORT-* chains behind.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
K8S_HOME="${K8S_HOME:-$HOME/.cache/bridge-k8s}"
IMAGE="${IMAGE:-localhost/bridge-python:latest}"
BRIDGE_IMAGE="${BRIDGE_IMAGE:-localhost/bridge:latest}"
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
# The pod network (see the header): the bridge, its gateway (the host's address on it, and the node's IP), the pods'
# range, and the Service range whose first address is the `kubernetes` Service (10.0.0.1:443).
POD_BRIDGE=k8sbr0 GW_IP=10.250.0.1 POD_CIDR=10.250.0.0/24 SVC_CIDR=10.0.0.0/24 SVC_API_IP=10.0.0.1
# The API server binds the bridge's gateway address only (not 0.0.0.0): pods reach it there (directly, or as
# 10.0.0.1:443 through kube-proxy's DNAT to this endpoint), the host reaches it there too (it is a local address), and
# it is not offered on eth0 or podman's networks' addresses. The kubeconfigs name this address.
API="https://$GW_IP:$API_PORT"
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
  pkgs=(containerd runc containernetworking-plugins openssl curl jq iproute2 iptables ca-certificates)
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
  local t; t=$(now)
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
build kube-controller-manager "$V" "$HERE/tools/k8s" k8s.io/kubernetes/cmd/kube-controller-manager "$KLD"
build kube-scheduler "$V" "$HERE/tools/k8s" k8s.io/kubernetes/cmd/kube-scheduler "$KLD"
build kube-proxy "$V" "$HERE/tools/k8s" k8s.io/kubernetes/cmd/kube-proxy "$KLD"
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
# id changed. The bridge's own image (BRIDGE_IMAGE) the same way when podman has it; without it, it is skipped.
save_image() { # podman-image archive-name
  local iid
  iid=$(podman image inspect --format '{{.Id}}' "$1" 2>/dev/null) || return 1
  if [[ ! -s "$IMG/$2.tar" || "$(cat "$IMG/$2.id" 2>/dev/null)" != "$iid" ]]; then
    podman save --format docker-archive -o "$IMG/$2.tar.new" "$1" >/dev/null && mv "$IMG/$2.tar.new" "$IMG/$2.tar"
    echo "$iid" >"$IMG/$2.id"
  fi
}
save_image "$IMAGE" sandbox || die "podman has no $IMAGE (run \`go tool task image\`)"
IMPORTS=(pause sandbox)
if save_image "$BRIDGE_IMAGE" bridge; then IMPORTS+=(bridge); else rm -f "$IMG/bridge.tar" "$IMG/bridge.id"; fi

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
  # keyUsage on the CA: strict verifiers refuse a CA without it (Python 3.13's ssl default context, which pods use
  # with the mounted ca.crt: "CA cert does not include key usage extension").
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=bridge-local-ca" 2>/dev/null
  # Every name a client may dial: the bind address (host and pods), the `kubernetes` Service's IP and DNS names
  # (in-cluster config uses 10.0.0.1), loopback.
  cert apiserver "/CN=kube-apiserver" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SVC_API_IP,IP:$GW_IP"
  cert admin "/O=system:masters/CN=admin"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  # The users the built-in ClusterRoleBindings name (system:kube-controller-manager, system:kube-scheduler,
  # system:node-proxier -> system:kube-proxy): no extra RBAC needed.
  cert kube-controller-manager "/CN=system:kube-controller-manager"
  cert kube-scheduler "/CN=system:kube-scheduler"
  cert kube-proxy "/CN=system:kube-proxy"
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
for u in admin kubelet kube-controller-manager kube-scheduler kube-proxy; do kubeconfig "$ST/$u.kubeconfig" "$u"; done
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
  local t; t=$(now)
  for ((i = 0; i < to * 10; i++)); do
    if "$@" >/dev/null 2>&1; then record "ready-$what" "$(elapsed "$t")s"; return 0; fi
    sleep 0.1
  done
  die "$what not ready after ${to}s (see $LOGS)"
}
alive() { kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null || { tail -30 "$LOGS/$1.log"; die "$1 exited"; }; }

# kubelet rewrites the first kernel tunables (protectKernelDefaults=false); the CNI bridge plugin sets ip_forward
# (isGateway); kube-proxy is configured to leave the rest alone (conntrack limits and timeouts, route_localnet), and
# the bridge-nf ones are saved in case br_netfilter gets loaded. Save them all so that down.sh can put them back.
if [[ ! -s "$ST/sysctl.orig" ]]; then
  sysctl -e vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes \
    net.ipv4.ip_forward net.ipv4.conf.all.route_localnet \
    net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables net.bridge.bridge-nf-call-arptables \
    net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established \
    net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal \
    net.netfilter.nf_conntrack_udp_timeout net.netfilter.nf_conntrack_udp_timeout_stream >"$ST/sysctl.orig"
fi
# The nftables tables and chains that exist before kube-proxy's iptables-nft creates its own: down.sh drops the
# tables (ip mangle, ip6 nat...) and base chains (ip filter INPUT...) that appeared only for it, once empty again,
# and leaves podman's (netavark's) alone.
[[ -e "$ST/nft-chains.before" ]] || nft list chains >"$ST/nft-chains.before" 2>/dev/null || true
# Paths outside $K8S_HOME that kubelet/containerd create whatever their config
# says (device-plugin socket, libcni cache, netns mounts, runc state, log links):
# remember which did not exist yet, so that down.sh removes only those.
if [[ ! -e "$ST/created-paths" ]]; then
  for d in /var/lib/kubelet /var/lib/cni /usr/libexec/kubernetes /var/run/netns /var/log/containers /run/containerd \
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
# Pod network: see the header. up.sh makes k8sbr0 with the gateway address itself (the bridge plugin would only on
# the first pod): the API server binds that address, and kubelet reports it as the node's IP, before any pod runs.
if ! ip link show "$POD_BRIDGE" >/dev/null 2>&1; then
  ip link add "$POD_BRIDGE" type bridge
fi
ip addr replace "$GW_IP/${POD_CIDR#*/}" dev "$POD_BRIDGE"
ip link set "$POD_BRIDGE" up
# hairpinMode: a pod reaches itself through its own Service. Containerd adds the loopback plugin itself.
cat >"$ST/cni/net.d/10-k8s.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "k8s", "plugins": [
  {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$GW_IP"}]],
            "routes": [{"dst": "$SVC_CIDR"}], "dataDir": "$ST/cni/ipam"}}]}
EOF
start containerd /usr/bin/containerd --config "$ST/containerd/config.toml" --log-level warn

waitfor etcd 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
alive etcd

# --bind-address: see API above. --advertise-address: the endpoint of the `kubernetes` Service, which the API
# server's own (lease) reconciler keeps, and kube-proxy DNATs 10.0.0.1:443 to.
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address="$GW_IP" --advertise-address="$GW_IP" --secure-port=$API_PORT \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SVC_CIDR" \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --allow-privileged=false \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=Hostname,InternalIP \
  --profiling=false --v=1

waitfor containerd 60 ctr --address "$CTR_SOCK" version
alive containerd
TI=$(now)
for img in "${IMPORTS[@]}"; do
  ctr --address "$CTR_SOCK" -n k8s.io images import "$IMG/$img.tar" >/dev/null || die "import $img.tar"
done
record image-import "$(elapsed "$TI")s (${IMPORTS[*]})"

waitfor kube-apiserver 120 "${KCURL[@]}" "$API/readyz"
alive kube-apiserver

# The controllers and the scheduler, each with its own kubeconfig, leader election off. Their own HTTPS ports
# (127.0.0.1) serve /healthz to anyone and nothing else: no --authentication/authorization-kubeconfig, whose
# delegation wants a front-proxy (requestheader) CA this API server does not have.
# --use-service-account-credentials: each controller acts as its own ServiceAccount in kube-system, as the built-in
# system:controller:* roles expect (the system:kube-controller-manager role alone does not cover them). The
# ServiceAccount token signer gets the key the API server verifies with, and --root-ca-file is what the
# kube-root-ca.crt ConfigMaps (and so every pod's ca.crt) carry. The CA also signs CSRs. --flex-volume-plugin-dir:
# kubelet's volumePluginDir (the default, /usr/libexec/kubernetes/..., it would create on the host).
KCM_KC="$ST/kube-controller-manager.kubeconfig"
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$KCM_KC" --bind-address=127.0.0.1 --secure-port=10257 \
  --leader-elect=false \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --service-cluster-ip-range="$SVC_CIDR" --cluster-cidr="$POD_CIDR" --allocate-node-cidrs=false \
  --controllers='*' \
  --flex-volume-plugin-dir="$ST/kubelet/volume-plugins" \
  --profiling=false --v=1
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$ST/kube-scheduler.kubeconfig" --bind-address=127.0.0.1 --secure-port=10259 \
  --leader-elect=false \
  --profiling=false --v=1

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
# --node-ip: the bridge's gateway, the address pods reach the node at (status.hostIP); kubelet itself listens on
# 127.0.0.1 only (a loopback node IP is refused), and the API server dials it as `localhost` (Hostname first).
start kubelet "$BIN/kubelet" --config="$ST/kubelet/config.yaml" --kubeconfig="$ST/kubelet.kubeconfig" \
  --root-dir="$ST/kubelet" --cert-dir="$ST/kubelet/pki" --hostname-override="$NODE_NAME" --node-ip="$GW_IP" --v=1

node_ready() {
  "${KCURL[@]}" "$API/api/v1/nodes/$NODE_NAME" |
    jq -e '.status.conditions[] | select(.type=="Ready") | .status=="True"' | grep -q true
}
waitfor node 120 node_ready
alive kubelet

# kube-proxy, iptables mode (iptables is Debian's nft variant: the rules live in nftables' ip/ip6 nat, filter and
# mangle tables beside podman's netavark ones, in KUBE-* chains that down.sh removes with `kube-proxy --cleanup`).
# It starts once the Node exists: it takes the node IP from it. Conntrack limits and timeouts are 0 = "leave the
# sysctls as they are"; localhostNodePorts false keeps route_localnet alone; NodePorts open on the bridge's gateway
# only (not on eth0); healthz and metrics bind 127.0.0.1; oomScoreAdj 0 (lowering it needs CAP_SYS_RESOURCE, which
# root lacks here). br_netfilter is not needed: pod -> Service traffic is routed to the gateway (the host), where
# PREROUTING DNATs it; pod -> Service -> pod on the same bridge does need it, and this kernel has it built in.
cat >"$ST/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$ST/kube-proxy.kubeconfig"}
hostnameOverride: "$NODE_NAME"
mode: iptables
clusterCIDR: "$POD_CIDR"
detectLocalMode: ClusterCIDR
nodePortAddresses: ["$GW_IP/32"]
healthzBindAddress: "127.0.0.1:10256"
metricsBindAddress: "127.0.0.1:10249"
oomScoreAdj: 0
iptables: {localhostNodePorts: false, masqueradeAll: false, syncPeriod: 30s, minSyncPeriod: 1s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, tcpBeLiberal: false, udpTimeout: 0s, udpStreamTimeout: 0s}
EOF
start kube-proxy "$BIN/kube-proxy" --config="$ST/kube-proxy.yaml" --v=1

waitfor kube-controller-manager 60 curl -skf https://127.0.0.1:10257/healthz
alive kube-controller-manager
waitfor kube-scheduler 60 curl -skf https://127.0.0.1:10259/healthz
alive kube-scheduler
waitfor kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz
alive kube-proxy
record cluster-start "$(elapsed "$TS")s (etcd start -> node Ready, all components healthy)"

# ---------------------------------------------------------------- 6. objects
# The ServiceAccount controller makes each namespace's `default` ServiceAccount and the root-CA publisher its
# kube-root-ca.crt ConfigMap; pods are refused (ServiceAccount admission) until the first exists, so wait for both.
post() { "${KCURL[@]}" -o /dev/null -H 'Content-Type: application/json' -X POST "$API$1" -d "$2" 2>/dev/null || true; }
post /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"sandboxes","labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/warn":"restricted"}}}'
ns_ready() {
  local ns
  for ns in default sandboxes; do
    "${KCURL[@]}" -o /dev/null "$API/api/v1/namespaces/$ns/serviceaccounts/default" || return 1
    "${KCURL[@]}" -o /dev/null "$API/api/v1/namespaces/$ns/configmaps/kube-root-ca.crt" || return 1
  done
}
waitfor serviceaccounts 60 ns_ready

record up-total "$(elapsed "$T0")s"
log "cluster up: API $API, kubeconfig $ST/admin.kubeconfig, node $NODE_NAME"
