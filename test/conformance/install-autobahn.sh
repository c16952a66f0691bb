#!/usr/bin/env bash
# Installs the Autobahn WebSocket testsuite (PyPI `autobahntestsuite`, `wstest`) into a Python 2.7
# virtualenv outside the repository and prints the path of `wstest`. The testsuite runs only on
# Python 2.7: it uses the machine's (GATEHOUSE_PYTHON2, else python2.7 on PATH, else pyenv's), and
# autobahn-requirements.txt pins every package (the last releases that still support 2.7).
# The virtualenv is made by `virtualenv` < 20.22 (the last that creates 2.7 environments),
# itself in a Python 3 venv beside it. Idempotent: an install with the same pins is reused.
#   GATEHOUSE_TOOLS_DIR   where tools go (default ~/.cache/gatehouse-tools); this script uses autobahn/
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/autobahn-requirements.txt"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/autobahn"
hash="$(cat "$requirements" "$0" | sha256sum | cut -c1-12)"
venv="$dir/py2-$hash"

if [[ ! -f "$venv/.complete" ]]; then
  python2="${GATEHOUSE_PYTHON2:-}"
  if [[ -z "$python2" ]]; then
    for candidate in "$(command -v python2.7 || true)" /usr/bin/python2.7 /usr/local/bin/python2.7 "$HOME"/.pyenv/versions/2.7*/bin/python2.7; do
      [[ -n "$candidate" && -x "$candidate" ]] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (2, 7)' 2>/dev/null && { python2="$candidate"; break; }
    done
  fi
  [[ -n "$python2" ]] || { echo "the Autobahn testsuite needs Python 2.7 (set GATEHOUSE_PYTHON2)" >&2; exit 1; }
  echo "installing autobahntestsuite into $venv with $python2" >&2
  mkdir -p "$dir"
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    bash "$here/../support/apt-install.sh" python3-venv
  fi
  maker="$dir/virtualenv-maker"
  [[ -x "$maker/bin/virtualenv" ]] || { python3 -m venv "$maker" >&2 && "$maker/bin/pip" install -q --disable-pip-version-check 'virtualenv<20.22' >&2; }
  # Made in place (virtualenvs hold absolute paths); .complete marks a finished install.
  rm -rf "$venv"
  "$maker/bin/virtualenv" -q -p "$python2" "$venv" >&2
  # wsaccel and ujson compile C extensions (a C compiler and the Python 2.7 headers are needed).
  "$venv/bin/pip" install -q --disable-pip-version-check --no-warn-script-location -r "$requirements" >&2
  touch "$venv/.complete"
  find "$dir" -mindepth 1 -maxdepth 1 -name 'py2-*' ! -path "$venv" -exec rm -rf {} +
fi
"$venv/bin/wstest" --autobahnversion >&2
ln -sf "$venv/bin/wstest" "$dir/wstest"
echo "$dir/wstest"
