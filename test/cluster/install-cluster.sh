#!/usr/bin/env bash
# Installs the parts of the one-node Kubernetes cluster of test/cluster (cluster.ts) that
# install-kube.sh does not (it provides etcd and kube-apiserver), and prints the directory holding
# them all as links (bin/):
#   - kubelet, kube-scheduler, kube-controller-manager, kube-proxy, kubectl: `go build` of
#     k8s.io/kubernetes/cmd/<name> with kube-build/go.mod (the apiserver build's go.mod and go.sum,
#     extended by `go mod tidy` for these commands, which go.mod lists as `tool`s; every version the
#     apiserver links is unchanged);
#   - coredns: coredns-build/main.go, CoreDNS with only the plugins the cluster uses;
#   - the pod sandbox image: pause/main.go, built statically and packed with umoci into an OCI
#     layout (pause-oci/, tag PAUSE_TAG below), which cluster.ts pushes to the cluster's registry;
#   - from Debian (test/support/apt-install.sh): containerd, runc, containernetworking-plugins,
#     conntrack, iptables, docker-registry, skopeo, umoci, iproute2.
# Idempotent: each build is cached by its version and a hash of its build module and of this script,
# and reuses the apiserver build's Go module and build caches (<tools>/kube/gomod, gocache).
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses cluster/
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/cluster"
kube="$tools/kube"
started=$SECONDS
mkdir -p "$dir/bin" "$kube"
# .ci/run starts every install script at once; two runs of this one must not build twice.
exec 9>"$dir/.lock"
flock 9

# Debian's containerd package enables its system service; the tests run their own containerd in
# a namespace of their own (cluster.ts), so the machine's is stopped and disabled as install-kube.sh
# does with etcd's.
had_containerd="$(dpkg-query -W -f='${Status}' containerd 2>/dev/null || true)"
bash "$here/../support/apt-install.sh" containerd runc containernetworking-plugins conntrack iptables iproute2 \
  docker-registry skopeo umoci util-linux
if [[ "$had_containerd" != *'install ok installed'* ]]; then
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now containerd.service >/dev/null 2>&1 || true
  elif [[ -x /etc/init.d/containerd ]]; then
    /etc/init.d/containerd stop >/dev/null 2>&1 || true
    update-rc.d containerd disable >/dev/null 2>&1 || true
  fi
fi

command -v go >/dev/null 2>&1 || { echo "install-cluster.sh needs a Go toolchain (go) on PATH" >&2; exit 1; }
# As install-kube.sh: this Go only, deletable module cache, static binaries, and the same caches,
# so that the packages the apiserver build compiled are not compiled again.
export GOMODCACHE="$kube/gomod" GOCACHE="$kube/gocache" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='-mod=readonly -modcacherw -buildvcs=false'
key() { cat "$@" "$0" | sha256sum | cut -c1-12; }

# --- CoreDNS
module="$here/coredns-build"
coredns_version="$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" { print $3; exit }' "$module/go.mod")"
[[ -n "$coredns_version" ]] || { echo "no github.com/coredns/coredns requirement in $module/go.mod" >&2; exit 1; }
coredns="$dir/coredns-$coredns_version-$(key "$module/go.mod" "$module/go.sum" "$module/main.go")"
if [[ ! -x "$coredns" ]]; then
  echo "building coredns $coredns_version" >&2
  start=$SECONDS
  (cd "$module" && go build -trimpath -ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$coredns_version" -o "$coredns.tmp" .)
  mv "$coredns.tmp" "$coredns"
  find "$dir" -maxdepth 1 -name 'coredns-*' ! -path "$coredns" -delete
  echo "built coredns in $((SECONDS - start)) s" >&2
fi
ln -sfn "$coredns" "$dir/bin/coredns"

# --- the pause image: an OCI layout with one layer holding /pause
module="$here/pause"
pause_tag=3.10
pause="$dir/pause-oci-$(key "$module/go.mod" "$module/main.go")"
if [[ ! -f "$pause/.complete" ]]; then
  echo "building the pause image" >&2
  rm -rf "$pause.tmp" && mkdir -p "$pause.tmp"
  (cd "$module" && go build -trimpath -ldflags='-s -w' -o "$pause.tmp/pause" .)
  layout="$pause.tmp/layout"
  umoci init --layout "$layout"
  umoci new --image "$layout:$pause_tag"
  umoci unpack --image "$layout:$pause_tag" "$pause.tmp/bundle" >/dev/null
  install -m 0755 "$pause.tmp/pause" "$pause.tmp/bundle/rootfs/pause"
  umoci repack --image "$layout:$pause_tag" "$pause.tmp/bundle"
  # As registry.k8s.io/pause: entrypoint /pause, the nobody-like uid 65535.
  umoci config --image "$layout:$pause_tag" --config.entrypoint /pause --config.user 65535:65535 --os linux --architecture amd64
  umoci gc --layout "$layout"
  mv "$layout" "$pause.tmp/oci"
  rm -rf "$pause.tmp/bundle" "$pause.tmp/pause"
  touch "$pause.tmp/.complete"
  rm -rf "$pause" && mv "$pause.tmp" "$pause"
  find "$dir" -maxdepth 1 -name 'pause-oci-*' ! -path "$pause" -exec rm -rf {} +
fi
ln -sfn "$pause/oci" "$dir/pause-oci"
echo "$pause_tag" >"$dir/pause-tag"

# .ci/run starts install-kube.sh at the same time. While it compiles kube-apiserver, the build below
# waits (CoreDNS and the pause image, which share nothing with it, are built first): the packages
# both builds link are then compiled once, into the shared build cache, not twice side by side on
# 2 cores.
wait_for_apiserver_build() {
  local waited=0
  while pgrep -f -- "-o $kube/kube-apiserver-" >/dev/null && ((waited < 1800)); do
    ((waited == 0)) && echo "waiting for install-kube.sh's kube-apiserver build (shared build cache)" >&2
    sleep 5
    waited=$((waited + 5))
  done
  ((waited == 0)) || echo "waited $waited s for the kube-apiserver build" >&2
}

# --- Kubernetes' node and control-plane commands
module="$here/kube-build"
version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$module/go.mod")"
[[ -n "$version" ]] || { echo "no k8s.io/kubernetes requirement in $module/go.mod" >&2; exit 1; }
commands=(kubelet kube-scheduler kube-controller-manager kube-proxy kubectl)
out="$dir/kube-$version-$(key "$module/go.mod" "$module/go.sum")"
if [[ ! -f "$out/.complete" ]]; then
  wait_for_apiserver_build
  echo "building ${commands[*]} $version with $(go version) (a cold build takes minutes)" >&2
  start=$SECONDS
  minor="${version#v*.}"
  stamp="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=$(cut -d. -f1 <<<"${version#v}") -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/component-base/version.gitTreeState=clean"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  packages=()
  for c in "${commands[@]}"; do packages+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$module" && go build -trimpath -ldflags="-s -w $stamp" -o "$out.tmp/" "${packages[@]}")
  touch "$out.tmp/.complete"
  rm -rf "$out" && mv "$out.tmp" "$out"
  # Older builds are hundreds of MB: keep only this one.
  find "$dir" -maxdepth 1 -name 'kube-v*' ! -path "$out" -exec rm -rf {} +
  echo "built ${commands[*]} in $((SECONDS - start)) s" >&2
fi
for c in "${commands[@]}"; do ln -sfn "$out/$c" "$dir/bin/$c"; done

# --- links to the Debian binaries, so that cluster.ts finds every part in one place
for c in containerd containerd-shim-runc-v2 runc conntrack iptables docker-registry skopeo; do
  path="$(command -v "$c" || true)"
  [[ -n "$path" ]] || { echo "install-cluster.sh: $c is not on PATH after the install" >&2; exit 1; }
  ln -sfn "$path" "$dir/bin/$c"
done
[[ -x /usr/lib/cni/bridge ]] || { echo "install-cluster.sh: no /usr/lib/cni/bridge (containernetworking-plugins)" >&2; exit 1; }
ln -sfn /usr/lib/cni "$dir/cni-bin"

"$dir/bin/kubelet" --version >&2
"$dir/bin/coredns" -version | tr '\n' ' ' >&2 && echo >&2
"$dir/bin/containerd" --version >&2
echo "cluster parts ready in $((SECONDS - started)) s" >&2
echo "$dir"
