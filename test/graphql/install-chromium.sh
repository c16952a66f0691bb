#!/usr/bin/env bash
# Installs Debian's chromium-headless-shell (the GraphiQL page test, graphiql-browser.test.ts,
# loads the page in it with no other origin reachable) and prints the path of its binary.
# Idempotent: apt-install.sh installs only what is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/../support/apt-install.sh" chromium-headless-shell
command -v chromium-headless-shell || echo /usr/bin/chromium-headless-shell
