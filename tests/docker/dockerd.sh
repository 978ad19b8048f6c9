# A private Docker engine for tests, sourced by the docker client's and the agent's tests:
#
#   source tests/docker/dockerd.sh
#   start_dockerd "$dir"          # exports DOCKER_SOCK=$dir/docker.sock
#   build_test_image berth-test:1 # a busybox image, no registry needed
#   ...
#   stop_dockerd                  # also removes $dir
#
# Each engine has its own data root, exec root (and with it its own containerd), pidfile and
# socket, and no bridge network (--bridge none: no docker0 to share, no iptables rules), so
# test scripts run in parallel (ctest -j) each start their own without interfering. It runs in
# a network namespace of its own: a dockerd with --bridge none deletes the interface docker0,
# which would take the host's own engine's network away. Needs root, dockerd (docker.io), the
# docker CLI and unshare (util-linux). Containers get no network.

DOCKERD_DIR=""

# docker CLI against our engine.
_dk() { docker -H "unix://$DOCKERD_DIR/docker.sock" "$@"; }

# Ends the process in pidfile $1 if its name is $2: SIGTERM, SIGKILL after 10 s.
_kill_pidfile() {
  local pid
  pid=$(cat "$1" 2> /dev/null) || return 0
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2> /dev/null)" = "$2" ] || return 0
  kill -TERM "$pid" 2> /dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2> /dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2> /dev/null || true
  while kill -0 "$pid" 2> /dev/null; do sleep 0.1; done
}

# Stops the engine in $DOCKERD_DIR, if one runs there (an earlier run that crashed before
# stop_dockerd leaves one behind, holding the socket). Its containers are removed with SIGKILL
# first: the engine would otherwise give each its 10 s stop timeout while shutting down. A
# dockerd that had to be killed leaves its containerd running, so that is ended too.
_kill_dockerd() {
  local ids
  ids=$(_dk ps -aq 2> /dev/null) && [ -n "$ids" ] && _dk rm -f $ids > /dev/null 2>&1
  _kill_pidfile "$DOCKERD_DIR/dockerd.pid" dockerd
  _kill_pidfile "$DOCKERD_DIR/exec/containerd/containerd.pid" containerd
}

# Starts the engine of $DOCKERD_DIR in the background ($! is its pid), its log appended to
# $DOCKERD_DIR/dockerd.log; start_dockerd waits for it, a test restarting it waits itself.
launch_dockerd() {
  unshare --net dockerd --data-root "$DOCKERD_DIR/data" --exec-root "$DOCKERD_DIR/exec" \
    -H "unix://$DOCKERD_DIR/docker.sock" --pidfile "$DOCKERD_DIR/dockerd.pid" \
    --bridge none --iptables=false --ip-masq=false >> "$DOCKERD_DIR/dockerd.log" 2>&1 &
}

start_dockerd() {
  DOCKERD_DIR=$(realpath -m "$1")
  mkdir -p "$DOCKERD_DIR"
  _kill_dockerd
  # The unix socket's path must fit in sun_path (108 bytes).
  [ ${#DOCKERD_DIR} -lt 90 ] || { echo "start_dockerd: $DOCKERD_DIR is too long" >&2; return 1; }
  : > "$DOCKERD_DIR/dockerd.log"
  launch_dockerd
  local pid=$!
  for _ in $(seq 300); do
    if _dk version > /dev/null 2>&1; then
      export DOCKER_SOCK="$DOCKERD_DIR/docker.sock"
      return 0
    fi
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "start_dockerd: dockerd did not answer on $DOCKERD_DIR/docker.sock; its log:" >&2
  tail -20 "$DOCKERD_DIR/dockerd.log" >&2
  return 1
}

# Stops the engine (SIGTERM; SIGKILL after 10 s) and removes its directory, unmounting what
# it left mounted there first (overlay layers, shm, netns of killed containers).
stop_dockerd() {
  [ -n "$DOCKERD_DIR" ] || return 0
  _kill_dockerd
  local m
  while read -r m; do umount -l "$m" 2> /dev/null || true; done < <(
    awk -v d="$DOCKERD_DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
  rm -rf "$DOCKERD_DIR"
  DOCKERD_DIR=""
  unset DOCKER_SOCK
}

# Imports a tiny image NAME from busybox-static into our engine (scripts/busybox-image.sh).
build_test_image() {
  bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/busybox-image.sh" "$1" \
    "unix://$DOCKERD_DIR/docker.sock"
}
