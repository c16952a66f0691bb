#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the tracing tests (test/tracing/) send spans to: the
# collector core's OTLP receiver and OTLP/HTTP exporter (otelcol-build/main.go lists them; what
# the collector builder would generate), with the machine's Go from the Go module proxy
# (GOPROXY from the environment; go.sum checked in, verified by the checksum database).
# Prints the binary's path on stdout.
# Idempotent: the binary is cached by a hash of the build module and this script, so a second
# run only checks and links. Everything Go downloads or compiles stays in the tools dir.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses otelcol/
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
module="$here/otelcol-build"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/otelcol"
hash="$(cat "$module/go.mod" "$module/go.sum" "$module/main.go" "$0" | sha256sum | cut -c1-12)"
binary="$dir/otelcol-$hash"
mkdir -p "$dir/bin"
if [[ ! -x "$binary" ]]; then
  command -v go >/dev/null 2>&1 || { echo "the test collector needs a Go toolchain (go) on PATH" >&2; exit 1; }
  echo "building the test OpenTelemetry Collector with $(go version) (a cold build takes minutes)" >&2
  start=$SECONDS
  # GOTOOLCHAIN=local: this Go, never a downloaded one. -mod=readonly: go.mod/go.sum decide every
  # version. CGO off: a static binary. Built to a temporary name so a killed build leaves no half binary.
  (
    cd "$module"
    GOMODCACHE="$tools/go-mod-cache" GOCACHE="$dir/gocache" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='-mod=readonly -modcacherw -buildvcs=false' \
      go build -trimpath -ldflags='-s -w' -o "$binary.tmp" .
  )
  mv "$binary.tmp" "$binary"
  find "$dir" -maxdepth 1 -name 'otelcol-*' ! -path "$binary" -delete
  echo "built the test collector in $((SECONDS - start)) s" >&2
fi
ln -sf "$binary" "$dir/bin/otelcol"
echo "$dir/bin/otelcol"
