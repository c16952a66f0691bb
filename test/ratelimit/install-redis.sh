#!/usr/bin/env bash
# Installs Debian's `redis-server` for the rate-limit (and, later, plugin store) tests and
# prints the binary's path. Idempotent (apt-install.sh installs only what is missing). The
# tests start their own redis-server on 127.0.0.1 with a random port and no persistence; the
# Debian package's own service, when the package enables one, is stopped so it holds no port.
#   GATEHOUSE_REDIS_SERVER   a redis-server binary to use instead (then nothing is installed)
set -euo pipefail
if [[ -n "${GATEHOUSE_REDIS_SERVER:-}" ]]; then
  [[ -x "$GATEHOUSE_REDIS_SERVER" ]] || { echo "GATEHOUSE_REDIS_SERVER=$GATEHOUSE_REDIS_SERVER is not executable" >&2; exit 1; }
  echo "$GATEHOUSE_REDIS_SERVER"
  exit 0
fi
if ! command -v redis-server >/dev/null 2>&1; then
  bash "$(dirname "$0")/../support/apt-install.sh" redis-server
  # Debian starts redis on 6379 when systemd runs; the tests never use it.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
    systemctl stop redis-server >/dev/null 2>&1 || true
  fi
fi
command -v redis-server
