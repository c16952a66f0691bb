#!/usr/bin/env bash
# HAProxy from Debian: the real PROXY protocol sender of test/l4 (`send-proxy` writes v1,
# `send-proxy-v2` v2), in front of `gatehouse run` as a load balancer would be. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash test/support/apt-install.sh haproxy
haproxy -v | head -1
