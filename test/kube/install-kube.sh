#!/usr/bin/env bash
# Installs the Kubernetes peers of the --kube tests (test/kube/apiserver.ts) and prints their
# paths: `etcd` from Debian's etcd-server package, and `kube-apiserver` compiled with the
# machine's Go from Kubernetes' published Go modules (test/kube/apiserver-build: go.mod pins
# k8s.io/kubernetes and every k8s.io/* staging module, go.sum fixes their hashes).
# Idempotent: the binary is cached by Kubernetes version (and a hash of the build module), so a
# second run only checks and links. Everything Go downloads or compiles stays under the tools dir.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses kube/
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
module="$here/apiserver-build"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
kube="$tools/kube"
mkdir -p "$kube/bin"

# etcd: the Debian package. Its postinst enables and may start the system service on the
# default ports; the tests run their own etcd on free ports, so that one is stopped and disabled.
if ! command -v etcd >/dev/null 2>&1; then
  echo "installing etcd-server (Debian)" >&2
  bash "$here/../support/apt-install.sh" etcd-server
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now etcd.service >/dev/null 2>&1 || true
  elif [[ -x /etc/init.d/etcd ]]; then
    /etc/init.d/etcd stop >/dev/null 2>&1 || true
    update-rc.d etcd disable >/dev/null 2>&1 || true
  fi
fi
ln -sf "$(command -v etcd)" "$kube/bin/etcd"

# kube-apiserver: keyed by the version required in go.mod and a hash of the module's files and
# of this script (the build flags).
version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$module/go.mod")"
[[ -n "$version" ]] || { echo "no k8s.io/kubernetes requirement in $module/go.mod" >&2; exit 1; }
hash="$(cat "$module/go.mod" "$module/go.sum" "$module/main.go" "$0" | sha256sum | cut -c1-12)"
binary="$kube/kube-apiserver-$version-$hash"
if [[ ! -x "$binary" ]]; then
  command -v go >/dev/null 2>&1 || { echo "kube-apiserver $version needs a Go toolchain (go) on PATH" >&2; exit 1; }
  echo "building kube-apiserver $version with $(go version) (a cold build takes minutes)" >&2
  start=$SECONDS
  # GOTOOLCHAIN=local: build with this Go, never download another one. -modcacherw: the module
  # cache stays deletable with rm -rf. CGO off: a static binary, and no C compiler needed.
  # -X: the version Kubernetes' own build stamps (it answers /version; unstamped: v0.0.0-master).
  minor="${version#v*.}"
  stamp="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=$(cut -d. -f1 <<<"${version#v}") -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/component-base/version.gitTreeState=clean"
  (
    cd "$module"
    GOMODCACHE="$kube/gomod" GOCACHE="$kube/gocache" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='-mod=readonly -modcacherw -buildvcs=false' \
      go build -trimpath -ldflags="-s -w $stamp" -o "$binary.tmp" .
  )
  mv "$binary.tmp" "$binary"
  # Older builds (another version or build module) are 100+ MB each: keep only this one.
  find "$kube" -maxdepth 1 -name 'kube-apiserver-*' ! -path "$binary" -delete
  echo "built kube-apiserver $version in $((SECONDS - start)) s" >&2
fi
ln -sf "$binary" "$kube/bin/kube-apiserver"
# Not `| head -1`: under pipefail, etcd killed by SIGPIPE for its later lines fails the script.
etcd_version="$("$kube/bin/etcd" --version)"
echo "${etcd_version%%$'\n'*}" >&2
"$kube/bin/kube-apiserver" --version >&2
echo "$kube/bin/etcd"
echo "$kube/bin/kube-apiserver"
