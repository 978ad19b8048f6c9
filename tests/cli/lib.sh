# Shared helpers for the end-to-end tests of the berth binary. Each test script sources this
# with BERTH (the binary) and SRC (the repository root) as its two arguments.
set -euo pipefail
BERTH=$1
SRC=$2
TMP=$(mktemp -d)
SERVER=
stop_server() {
  [ -z "$SERVER" ] || { kill -9 "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; } || true
}
trap 'stop_server; rm -rf "$TMP"' EXIT
# A command that ends the test under set -e without a FAIL of its own names its line, in a
# function or a subshell too (errtrace: the trap is inherited).
set -o errtrace
trap '[[ $- != *e* ]] || echo "FAIL: line $LINENO of $0 exited $?: $BASH_COMMAND" >&2' ERR
cd "$SRC"

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error "substring" command...: the command must exit non-zero and print the substring.
expect_error() {
  local want=$1; shift
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "expected failure from: $*"
  [ "$rc" -lt 128 ] || fail "crashed (exit $rc): $*"
  grep -qF -- "$want" <<<"$out" || fail "expected '$want' in output of: $*; got: $out"
}

# expect_exit2 "substring" args...: berth refuses an input (exit 2, not 1 or a crash) and prints
# the substring.
expect_exit2() {
  local want=$1; shift
  local out rc=0
  out=$("$BERTH" "$@" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "expected exit 2 from berth $*, got $rc: $out"
  grep -qF -- "$want" <<<"$out" || fail "expected '$want' from berth $*; got: $out"
}

# json_get FILE EXPR: the jq expression's value on the JSON file, raw (jq is in install-deps).
json_get() { jq -r "$2" "$1"; }

# wait_line LOG PID PATTERN: until LOG holds a line matching PATTERN (30 s), failing with the log
# when the process PID exits first.
wait_line() {
  for _ in $(seq 300); do
    grep -q "$3" "$1" && return 0
    kill -0 "$2" 2>/dev/null || fail "the process exited: $(cat "$1")"
    sleep 0.1
  done
  fail "no '$3' in $1 after 30 s: $(cat "$1")"
}

# start_server [FLAGS...]: a berth server over $TMP/state with the dgx-4 cluster (or $CLUSTER) and FLAGS, on
# a free loopback port unless FLAGS give --listen, logging to $TMP/server.log; sets SERVER (its
# pid) and BERTH_ADDR (https://HOST:PORT when it serves TLS).
start_server() {
  local listen=(--listen 127.0.0.1:0)
  [[ " $* " != *" --listen "* ]] || listen=()
  : > "$TMP/server.log"
  "$BERTH" server "${listen[@]}" --state "$TMP/state" \
    --cluster "${CLUSTER:-examples/scenarios/clusters/dgx-4.yaml}" "$@" >> "$TMP/server.log" 2>&1 &
  SERVER=$!
  wait_line "$TMP/server.log" "$SERVER" 'listening on'
  BERTH_ADDR=$(sed -n 's|.*listening on \(https\{0,1\}://[^ ]*\) .*|\1|p' "$TMP/server.log")
  BERTH_ADDR=${BERTH_ADDR#http://}
  [ -n "$BERTH_ADDR" ] || fail "the server never said where it listens: $(cat "$TMP/server.log")"
  export BERTH_ADDR
}

# serve_dir DIR: busybox httpd serving DIR on a free loopback port; sets HTTPD (its pid) and
# HTTPD_PORT. A random port may be taken (httpd then exits at once): another is tried.
serve_dir() {
  for _ in $(seq 20); do
    HTTPD_PORT=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$HTTPD_PORT") 2>/dev/null && continue  # taken
    busybox httpd -f -p "127.0.0.1:$HTTPD_PORT" -h "$1" &
    HTTPD=$!
    for _ in $(seq 50); do
      kill -0 "$HTTPD" 2>/dev/null || break
      (exec 3<>"/dev/tcp/127.0.0.1/$HTTPD_PORT") 2>/dev/null && return 0
      sleep 0.1
    done
    kill "$HTTPD" 2>/dev/null || true
    wait "$HTTPD" 2>/dev/null || true
  done
  fail "busybox httpd found no free port"
}

# wait_state ID STATE: until the job is in STATE (a scheduling cycle runs every 0.1 s).
wait_state() {
  for _ in $(seq 100); do
    [ "$("$BERTH" inspect "$1" | jq -r .state)" = "$2" ] && return 0
    sleep 0.1
  done
  fail "job $1 never became $2: $("$BERTH" inspect "$1")"
}
