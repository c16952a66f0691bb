#!/usr/bin/env bash
# apt-get install for the test install scripts, which .ci/run starts side by side: waits for
# dpkg's lock instead of failing on it, and installs only what is missing.
#   bash test/support/apt-install.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
export DEBIAN_FRONTEND=noninteractive
# The lists may be missing on a new machine (.ci/run updates them once; a developer may not have).
if ! apt-cache show "${missing[0]}" >/dev/null 2>&1; then apt-get -o DPkg::Lock::Timeout=600 update -qq; fi
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
