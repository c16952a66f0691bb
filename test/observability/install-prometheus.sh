#!/usr/bin/env bash
# Builds `prometheus` (the server only: the upstream github.com/prometheus/prometheus module,
# unmodified, with the machine's Go from the Go module proxy) into a versioned directory
# outside the repository, and prints the binary's path. Used by .ci/run and
# test/observability/dashboard.test.ts, which scrape a real gateway and extauth with it.
# Idempotent: an existing build of the same version is reused.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses prometheus/
#   PROMETHEUS_MODULE_VERSION  the module version (v0.3MM.P is Prometheus 3.MM.P; default below)
# Build tags: remove_all_sd drops the cloud service-discovery plugins (AWS, Azure, GCE,
# Kubernetes, ...; static, file and HTTP discovery stay), which more than halves the cold build;
# without builtinassets the web UI is not embedded, and the HTTP API the tests use is unaffected.
set -euo pipefail

version="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/prometheus"
binary="$dir/prometheus-$version"

installed() {
  [[ -x "$binary" ]] && "$binary" --version >/dev/null 2>&1
}

if ! installed; then
  command -v go >/dev/null 2>&1 || { echo "install-prometheus.sh: prometheus $version needs a Go toolchain (go) on PATH" >&2; exit 1; }
  echo "building prometheus $version with $(go version) (a cold build takes minutes)" >&2
  mkdir -p "$dir"
  start=$SECONDS
  # GOTOOLCHAIN=local: build with this Go, never download another one. CGO off: a static binary.
  # The module and build caches are shared with the other Go-built tools (helm, kube), so their
  # common dependencies are fetched and compiled once. GOBIN is a temporary directory first so
  # that a killed build never leaves a half binary under the cached name.
  rm -rf "$dir/gobin.tmp"
  # The version Prometheus reports (`--version`, /api/v1/status/buildinfo), as its Makefile sets it:
  # module v0.3MM.P is release 3.MM.P.
  if [[ "$version" =~ ^v0\.3([0-9]{2})\.([0-9]+)$ ]]; then release="3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"; else release="${version#v}"; fi
  ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Revision=$version -X github.com/prometheus/common/version.Branch=module"
  GOBIN="$dir/gobin.tmp" GOMODCACHE="$tools/go-mod-cache" GOCACHE="$tools/go-build-cache" GOTOOLCHAIN=local \
    CGO_ENABLED=0 GOFLAGS='-mod=mod -modcacherw -buildvcs=false' \
    go install -trimpath -tags remove_all_sd -ldflags="$ldflags" \
      "github.com/prometheus/prometheus/cmd/prometheus@$version" >&2
  mv "$dir/gobin.tmp/prometheus" "$binary"
  rm -rf "$dir/gobin.tmp"
  find "$dir" -maxdepth 1 -name 'prometheus-v*' ! -path "$binary" -delete
  echo "built prometheus $version in $((SECONDS - start)) s" >&2
  installed || { echo "install-prometheus.sh: $binary does not run" >&2; exit 1; }
fi
mkdir -p "$dir/bin"
ln -sf "$binary" "$dir/bin/prometheus"
# sed, not head: head exiting early can kill the binary with SIGPIPE under pipefail (a red install).
"$binary" --version 2>&1 | sed -n 1p >&2
echo "$dir/bin/prometheus"
