#!/usr/bin/env bash
# Installs curl (Debian package) when missing: test/plugins/quickstart-plugin.test.ts runs the
# quickstart's try-lines, which are curl commands, exactly as printed. Idempotent; prints what
# it found or installed. Used by .ci/run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v curl >/dev/null 2>&1; then
  echo "installing curl" >&2
  bash "$here/../support/apt-install.sh" curl
fi
echo "curl: $(command -v curl) ($(curl --version | head -n1 | cut -d' ' -f1-2))"
