#!/usr/bin/env bash
# HAProxy from Debian: the real PROXY protocol sender of test/l4 (`send-proxy` writes v1,
# `send-proxy-v2` v2), in front of `gatehouse run` as a load balancer would be. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash test/support/apt-install.sh haproxy
# Not `| head -1`: under pipefail, head closing the pipe early can kill haproxy with SIGPIPE (a red install).
haproxy -v | sed -n 1p
