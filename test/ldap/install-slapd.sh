#!/usr/bin/env bash
# Installs the LDAP peer of the ldap tests (test/ldap/slapd.ts): OpenLDAP's `slapd` and the
# `ldap-utils` clients (ldapadd, ldapsearch) from Debian. The tests start their own slapd on
# 127.0.0.1 with a temporary configuration; the system service the package may start is stopped
# and disabled. Idempotent: installs only what is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v slapd >/dev/null 2>&1 && [[ ! -x /usr/sbin/slapd ]]; then
  echo "installing slapd, ldap-utils (Debian)" >&2
  # No debconf questions: the package's own directory is not used by the tests.
  echo "slapd slapd/no_configuration boolean true" | debconf-set-selections 2>/dev/null || true
  bash "$here/../support/apt-install.sh" slapd ldap-utils
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now slapd.service >/dev/null 2>&1 || true
  elif [[ -x /etc/init.d/slapd ]]; then
    /etc/init.d/slapd stop >/dev/null 2>&1 || true
    update-rc.d slapd disable >/dev/null 2>&1 || true
  fi
fi
bash "$here/../support/apt-install.sh" ldap-utils
# Not `| head -1`: under pipefail, slapd killed by SIGPIPE would fail the script.
version="$(/usr/sbin/slapd -VV 2>&1 || true)"
echo "${version%%$'\n'*}" >&2
