#!/usr/bin/env bash
# Builds `helm` (v3, the upstream helm.sh/helm/v3 module, unmodified) from the Go module proxy
# with the machine's Go, into a versioned directory outside the repository, and prints the
# binary's path. Idempotent: an existing build of the same version is reused. Used by .ci/run
# and test/helm/helm-template.test.ts.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools)
#   HELM_VERSION          the Helm release (default below)
set -euo pipefail

version="${HELM_VERSION:-3.22.0}"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/helm-v$version"
helm="$dir/helm"

installed() {
  [[ -x "$helm" ]] && "$helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "v$version"
}

if ! installed; then
  command -v go >/dev/null || { echo "install-helm.sh: no go on PATH (Go 1.24+ is needed to build helm)" >&2; exit 1; }
  echo "building helm v$version into $dir with $(go version)" >&2
  mkdir -p "$dir"
  start=$SECONDS
  # The module and build caches live beside the tools, so a rebuild (another version) is cheap
  # and nothing lands in the user's own Go caches.
  export GOBIN="$dir" GOMODCACHE="$tools/go-mod-cache" GOCACHE="$tools/go-build-cache" GOFLAGS=-modcacherw CGO_ENABLED=0
  # Version strings as Helm's Makefile sets them (`go install` alone reports "v3.22" and a
  # Kubernetes 1.20 default for .Capabilities): Helm's own, and the client-go it builds with.
  gomod="$(go mod download -json "helm.sh/helm/v3@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  k8s_minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")"
  [[ -n "$k8s_minor" ]] || { echo "install-helm.sh: no k8s.io/client-go version in $gomod" >&2; exit 1; }
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@v$version" >&2
  echo "built helm v$version in $((SECONDS - start)) s" >&2
  installed || { echo "install-helm.sh: $helm does not report v$version" >&2; exit 1; }
fi
ln -sfn "$dir/helm" "$tools/helm"
"$helm" version >&2
echo "$helm"
