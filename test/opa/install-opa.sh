#!/usr/bin/env bash
# Installs the `opa` binary the OPA tests (test/opa/) compare decisions against and that
# `opaAuth` compiles Rego to Wasm with: built with the machine's Go from OPA's published Go
# module (github.com/open-policy-agent/opa at the version pinned below; the Go checksum
# database verifies the module). Prints the binary's path on stdout.
# Idempotent: the binary is cached by version, so a second run only checks and links.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses opa/
set -euo pipefail

version="v1.22.3"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/opa"
binary="$dir/opa-$version"
mkdir -p "$dir/bin"
if [[ ! -x "$binary" ]]; then
  command -v go >/dev/null 2>&1 || { echo "opa $version needs a Go toolchain (go) on PATH" >&2; exit 1; }
  echo "building opa $version with $(go version) (a cold build takes minutes)" >&2
  start=$SECONDS
  # GOTOOLCHAIN=local: build with this Go, never download another one. CGO off: a static binary.
  # GOBIN writes into a temporary directory first so that a killed build never leaves a half binary.
  rm -rf "$dir/gobin.tmp"
  GOBIN="$dir/gobin.tmp" GOMODCACHE="$dir/gomod" GOCACHE="$dir/gocache" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='-modcacherw -buildvcs=false' \
    go install -trimpath -ldflags='-s -w' "github.com/open-policy-agent/opa@$version"
  mv "$dir/gobin.tmp/opa" "$binary"
  rm -rf "$dir/gobin.tmp"
  find "$dir" -maxdepth 1 -name 'opa-v*' ! -path "$binary" -delete
  echo "built opa $version in $((SECONDS - start)) s" >&2
fi
ln -sf "$binary" "$dir/bin/opa"
"$dir/bin/opa" version >&2
echo "$dir/bin/opa"
