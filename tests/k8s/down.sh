#!/usr/bin/env bash
# down.sh: stop everything up.sh started (by recorded PID only) and clean up: pods, containerd shims, mounts, pod
# cgroups, the pods' parent link k8snul0, the kernel tunables kubelet changed, and $K8S_HOME/state. Builds (bin/)
# and images/ are kept; --purge removes them too.
set -uo pipefail

K8S_HOME="${K8S_HOME:-$HOME/.cache/bridge-k8s}"
ST="$K8S_HOME/state"
PKI="$ST/pki"
PIDS="$ST/pids"
CTR_SOCK="$ST/containerd/containerd.sock"
API="https://127.0.0.1:6443"
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

# 1. Let kubelet tear pods down properly (CNI DEL, netns, cgroups).
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
  if [[ "$(cat /proc/$p/comm 2>/dev/null)" == containerd-shim* ]]; then
    log "killing leftover shim pid $p"; kill -KILL "$p" 2>/dev/null
  fi
done
stop containerd 20
stop kube-apiserver 20
stop etcd 20

# 3. Mounts under state (overlay rootfs, kubelet tmpfs, shm), network namespaces
#    created for our pods, pod cgroups, the bridge.
if [[ -d "$ST" ]]; then
  findmnt -rn -o TARGET | grep -F "$ST/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
fi
if [[ -s "$ST/netns.before" || -e "$ST/netns.before" ]]; then
  for n in $(ls /var/run/netns 2>/dev/null); do
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
ip link show k8snul0 >/dev/null 2>&1 && { log "deleting k8snul0"; ip link del k8snul0; }

# 4. Kernel tunables kubelet rewrote.
if [[ -s "$ST/sysctl.orig" ]]; then
  while read -r k _ v; do sysctl -q -w "$k=$v" >/dev/null; done <"$ST/sysctl.orig"
  log "restored sysctls: $(tr '\n' ' ' <"$ST/sysctl.orig")"
fi

# 5. Files outside $K8S_HOME that kubelet made.
for l in /var/log/containers/*.log; do
  [[ -L "$l" && "$(readlink "$l")" == "$ST/"* ]] && rm -f "$l"
done
# Paths up.sh saw missing before the cluster started: remove them again.
# kubelet's device-plugin socket and the libcni result cache are ours entirely;
# the rest only if empty.
if [[ -s "$ST/created-paths" ]]; then
  for d in $(sort -r "$ST/created-paths"); do
    [[ -e "$d" ]] || continue
    case "$d" in
      /var/lib/kubelet|/var/lib/cni) rm -rf "$d" ;;
      *) rmdir "$d" 2>/dev/null || log "left non-empty $d" ;;
    esac
  done
fi

rm -rf "$ST"
if [[ "${1:-}" == --purge ]]; then rm -rf "$K8S_HOME/bin" "$K8S_HOME/images"; fi
log "done"
