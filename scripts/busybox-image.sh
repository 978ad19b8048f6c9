#!/usr/bin/env bash
# Imports a tiny image NAME from busybox-static (/bin/busybox, statically linked: a shell and
# the usual applets), with no registry involved: the quick start's demo image and the tests'.
#   bash scripts/busybox-image.sh NAME [DOCKER_HOST]   (default: the engine docker talks to)
set -euo pipefail
name=$1
host=${2:-${DOCKER_HOST:-unix:///var/run/docker.sock}}
busybox=$(command -v busybox) || { echo "busybox-image: no busybox (apt-get install busybox-static)" >&2; exit 1; }
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/etc"
cp "$busybox" "$rootfs/bin/busybox"
for applet in sh echo sleep cat env ls nproc true false printf kill ps head tr wc grep; do
  ln -s busybox "$rootfs/bin/$applet"
done
tar -C "$rootfs" -c . | docker -H "$host" import -c 'ENV PATH=/bin' - "$name" > /dev/null
