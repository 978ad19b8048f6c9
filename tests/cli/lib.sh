# Shared helpers for the end-to-end tests of the berth binary. Each test script sources this
# with BERTH (the binary) and SRC (the repository root) as its two arguments.
set -euo pipefail
BERTH=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
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
