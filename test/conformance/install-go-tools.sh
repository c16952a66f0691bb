#!/usr/bin/env bash
# Builds the Go peers of the conformance suites with the machine's Go from the Go module proxy
# and prints their paths: h2spec (HTTP/2 conformance) and grpc-go's interop client and server.
# tools-build/ is a module whose go.mod lists them as `tool`s and pins every version
# (go.sum checked in), so the binaries are the same on every machine.
# Idempotent: the binaries are cached by a hash of the build module and this script, so a
# second run only checks and links. Everything Go downloads or compiles stays in the tools dir.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses conformance/
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
module="$here/tools-build"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/conformance"
hash="$(cat "$module/go.mod" "$module/go.sum" "$0" | sha256sum | cut -c1-12)"
bin="$dir/go-$hash"
# binary name → package (the `tool` lines of go.mod)
declare -A packages=(
  [h2spec]=github.com/summerwind/h2spec/cmd/h2spec
  [grpc-interop-client]=google.golang.org/grpc/interop/client
  [grpc-interop-server]=google.golang.org/grpc/interop/server
)
mkdir -p "$dir/bin"
if [[ ! -f "$bin/.complete" ]]; then
  command -v go >/dev/null 2>&1 || { echo "the conformance tools need a Go toolchain (go) on PATH" >&2; exit 1; }
  echo "building h2spec and the grpc-go interop client and server with $(go version)" >&2
  start=$SECONDS
  mkdir -p "$bin"
  # GOTOOLCHAIN=local: this Go, never a downloaded one. -mod=readonly: go.mod/go.sum decide every
  # version. CGO off: static binaries, no C compiler needed.
  for name in "${!packages[@]}"; do
    (
      cd "$module"
      GOMODCACHE="$tools/go-mod-cache" GOCACHE="$tools/go-build-cache" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='-mod=readonly -modcacherw -buildvcs=false' \
        go build -trimpath -ldflags='-s -w' -o "$bin/$name" "${packages[$name]}"
    )
  done
  touch "$bin/.complete"
  # Older builds (another build module) are tens of MB: keep only this one.
  find "$dir" -mindepth 1 -maxdepth 1 -name 'go-*' ! -path "$bin" -exec rm -rf {} +
  echo "built in $((SECONDS - start)) s" >&2
fi
for name in "${!packages[@]}"; do
  ln -sf "$bin/$name" "$dir/bin/$name"
  echo "$dir/bin/$name"
done
