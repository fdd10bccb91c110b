#!/usr/bin/env bash
# down.sh: stop everything up.sh started (by recorded PID only) and put the host back as it was:
#   - the controller manager and the scheduler first (nothing recreates or places pods any more), then every pod
#     through the API (kubelet tears each down: CNI DEL, netns, cgroups), kubelet, leftover containers and shims,
#     containerd;
#   - kube-proxy, then `kube-proxy --cleanup` and a sweep of any KUBE-* chain left (kube-proxy's and kubelet's shared
#     KUBE-FIREWALL, the canaries) in the iptables-nft and ip6tables-nft filter/nat/mangle/raw tables, and the nftables
#     tables that appeared only for them once empty; podman's (netavark's) chains and tables are not touched;
#   - the API server and etcd; mounts, pod netns, pod cgroups, the pod bridge k8sbr0 (and k8snul0, an older up.sh's);
#   - the sysctls kubelet, the CNI bridge plugin or kube-proxy may have changed (saved by up.sh); the host paths
#     kubelet/containerd created; $K8S_HOME/state.
# Builds (bin/) and images/ are kept; --purge removes them too.
set -uo pipefail

K8S_HOME="${K8S_HOME:-$HOME/.cache/bridge-k8s}"
ST="$K8S_HOME/state"
PKI="$ST/pki"
PIDS="$ST/pids"
CTR_SOCK="$ST/containerd/containerd.sock"
# The API server's address, as up.sh wrote it in the admin kubeconfig.
API=$(sed -n 's/.*server: "\([^"]*\)".*/\1/p' "$ST/admin.kubeconfig" 2>/dev/null | head -1)
API="${API:-https://10.250.0.1:6443}"
log() { echo "[down] $*"; }

pid_of() { [[ -s "$PIDS/$1.pid" ]] && cat "$PIDS/$1.pid"; }
running() { local p; p=$(pid_of "$1") && kill -0 "$p" 2>/dev/null; }
stop() { # name [timeout_s]
  local name=$1 to=${2:-20} p
  p=$(pid_of "$name") || return 0
  if kill -0 "$p" 2>/dev/null; then
    log "stopping $name (pid $p)"
    kill -TERM "$p" 2>/dev/null
    for ((i = 0; i < to * 10; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then log "$name did not exit; SIGKILL $p"; kill -KILL "$p" 2>/dev/null; sleep 0.5; fi
    log "$name stopped after $((i / 10)).$((i % 10))s"
  fi
  rm -f "$PIDS/$name.pid"
}

# 1. Nothing may recreate (ReplicaSets, Jobs...) or place pods while they go; then let kubelet tear them down
#    properly (CNI DEL, netns, cgroups).
stop kube-controller-manager 20
stop kube-scheduler 20
if running kube-apiserver && running kubelet && [[ -s "$PKI/admin.crt" ]]; then
  KC=(curl -sS --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
  nss=$("${KC[@]}" "$API/api/v1/pods" 2>/dev/null | jq -r '.items[].metadata.namespace' 2>/dev/null | sort -u)
  for ns in $nss; do
    log "deleting pods in $ns"
    "${KC[@]}" -o /dev/null -X DELETE "$API/api/v1/namespaces/$ns/pods?gracePeriodSeconds=1" || true
  done
  for ((i = 0; i < 300; i++)); do
    n=$("${KC[@]}" "$API/api/v1/pods" 2>/dev/null | jq '.items | length' 2>/dev/null || echo 0)
    [[ "$n" == 0 ]] && break
    sleep 0.1
  done
fi

# 2. kubelet, then whatever containers are left, then containerd.
stop kubelet 20
if running containerd; then
  C=(ctr --address "$CTR_SOCK" -n k8s.io)
  for t in $("${C[@]}" tasks ls -q 2>/dev/null); do
    "${C[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1
  done
  sleep 0.5
  for t in $("${C[@]}" tasks ls -q 2>/dev/null); do "${C[@]}" tasks delete -f "$t" >/dev/null 2>&1; done
  for c in $("${C[@]}" containers ls -q 2>/dev/null); do "${C[@]}" containers delete "$c" >/dev/null 2>&1; done
fi
# shims are started by our containerd and outlive it: end them by the pid they recorded.
for f in "$ST"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
  [[ -s "$f" ]] || continue
  p=$(cat "$f")
  if [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == containerd-shim* ]]; then
    log "killing leftover shim pid $p"; kill -KILL "$p" 2>/dev/null
  fi
done
stop containerd 20

# 3. kube-proxy and its iptables(-nft) rules. `kube-proxy --cleanup` removes its service chains (and any nftables-mode
#    or ipvs leftovers); it leaves KUBE-FIREWALL (shared with kubelet) and the mangle canaries, so every KUBE-* chain
#    left, and every jump to one from a built-in chain, goes by name. Only after a cluster of ours ran (state exists).
stop kube-proxy 20
kube_sweep() { # iptables-save-cmd iptables-cmd
  local save=$1 ipt=$2 rules t c i
  command -v "$save" >/dev/null && command -v "$ipt" >/dev/null || return 0
  rules=$("$save" 2>/dev/null | awk '
    /^\*/    { t = substr($0, 2); delete n; next }
    /^:KUBE-/ { print "X", t, substr($1, 2); next }
    /^-A /   { c = $2; n[c]++; if (c !~ /^KUBE-/ && $0 ~ / -[jg] KUBE-/) print "D", t, c, n[c] }')
  # jumps from other chains, by rule number, last first; then flush every KUBE-* chain, then delete them.
  while read -r t c i; do "$ipt" -w -t "$t" -D "$c" "$i" || log "$ipt -t $t -D $c $i failed"; done \
    < <(grep '^D ' <<<"$rules" | cut -d' ' -f2- | sort -k1,1 -k2,2 -k3,3nr)
  while read -r t c; do "$ipt" -w -t "$t" -F "$c"; done < <(grep '^X ' <<<"$rules" | cut -d' ' -f2-)
  while read -r t c; do "$ipt" -w -t "$t" -X "$c" || log "could not delete $ipt -t $t $c"; done \
    < <(grep '^X ' <<<"$rules" | cut -d' ' -f2-)
}
if [[ -d "$ST" ]]; then
  if [[ -x "$K8S_HOME/bin/kube-proxy" && -e "$ST/kube-proxy.yaml" ]]; then
    "$K8S_HOME/bin/kube-proxy" --cleanup --v=0 >>"$ST/logs/kube-proxy-cleanup.log" 2>&1 \
      || log "kube-proxy --cleanup reported errors (see the sweep below)"
  fi
  kube_sweep iptables-save iptables
  kube_sweep ip6tables-save ip6tables
  # iptables-nft made tables (e.g. ip mangle, ip6 nat) and base chains (ip filter INPUT, OUTPUT) that were not there
  # before up.sh: drop those that hold no rule any more. Whatever existed before, or holds anyone's rule, stays.
  if [[ -e "$ST/nft-chains.before" ]] && command -v nft >/dev/null; then
    chains() { awk '$1 == "table" { f = $2; t = $3; print f, t, "-" } $1 == "chain" { print f, t, $2 }'; }
    no_rule() { ! nft list "$@" 2>/dev/null | grep -qvE '^[[:space:]]*(table |chain |type |\}|$)'; }
    before=$(chains <"$ST/nft-chains.before")
    while read -r fam tbl ch; do
      grep -qxF "$fam $tbl $ch" <<<"$before" && continue
      case "$tbl" in filter | nat | mangle | raw | security) ;; *) continue ;; esac
      if [[ "$ch" == - ]]; then
        no_rule table "$fam" "$tbl" && { log "dropping nftables table $fam $tbl"; nft delete table "$fam" "$tbl"; }
      elif grep -qxF "$fam $tbl -" <<<"$before"; then
        no_rule chain "$fam" "$tbl" "$ch" && { log "dropping nftables chain $fam $tbl $ch"; nft delete chain "$fam" "$tbl" "$ch"; }
      fi
    done < <(nft list chains 2>/dev/null | chains)
  fi
  left=$( (iptables-save; ip6tables-save) 2>/dev/null | grep -c -- 'KUBE-')
  [[ "$left" == 0 ]] || log "WARNING: $left iptables lines still name KUBE-* chains"
fi

stop kube-apiserver 20
stop etcd 20

# 4. Mounts under state (overlay rootfs, kubelet tmpfs, shm), network namespaces
#    created for our pods, pod cgroups, the bridge.
if [[ -d "$ST" ]]; then
  findmnt -rn -o TARGET | grep -F "$ST/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
fi
if [[ -s "$ST/netns.before" || -e "$ST/netns.before" ]]; then
  for f in /var/run/netns/*; do
    [[ -e "$f" ]] || continue
    n=${f##*/}
    grep -qx "$n" "$ST/netns.before" 2>/dev/null && continue
    [[ "$n" == cni-* ]] || continue
    log "removing netns $n"; umount "/var/run/netns/$n" 2>/dev/null; rm -f "/var/run/netns/$n"
  done
fi
# (`ctr run` in the k8s.io namespace, used when debugging, leaves empty /k8s.io cgroups)
for d in /sys/fs/cgroup/*/k8s.io; do [[ -d "$d" ]] && rmdir "$d" 2>/dev/null; done
for d in /sys/fs/cgroup/*/kubepods; do
  [[ -d "$d" ]] || continue
  find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  [[ -d "$d" ]] && log "could not remove cgroup $d (still in use?)"
done
for br in k8sbr0 k8snul0; do
  ip link show "$br" >/dev/null 2>&1 && { log "deleting $br"; ip link del "$br"; }
done

# 5. Kernel tunables kubelet, the bridge plugin or kube-proxy rewrote (up.sh saved them before anything started).
if [[ -s "$ST/sysctl.orig" ]]; then
  while read -r k _ v; do sysctl -q -w "$k=$v" >/dev/null; done <"$ST/sysctl.orig"
  log "restored sysctls: $(tr '\n' ' ' <"$ST/sysctl.orig")"
fi

# 6. Files outside $K8S_HOME that kubelet made.
for l in /var/log/containers/*.log; do
  [[ -L "$l" && "$(readlink "$l")" == "$ST/"* ]] && rm -f "$l"
done
# Paths up.sh saw missing before the cluster started: remove them again.
# kubelet's device-plugin socket, the libcni result cache and the flexvolume dir are ours entirely;
# the rest only if empty.
if [[ -s "$ST/created-paths" ]]; then
  sort -r "$ST/created-paths" | while read -r d; do
    [[ -e "$d" ]] || continue
    case "$d" in
      /var/lib/kubelet | /var/lib/cni | /usr/libexec/kubernetes) rm -rf "$d" ;;
      *) rmdir "$d" 2>/dev/null || log "left non-empty $d" ;;
    esac
  done
fi

rm -rf "$ST"
if [[ "${1:-}" == --purge ]]; then rm -rf "${K8S_HOME:?}/bin" "${K8S_HOME:?}/images"; fi
log "done"
