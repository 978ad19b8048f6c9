#!/usr/bin/env bash
# --limit NAME=VALUE raises or lowers a bound for one run; bad values are clear errors that name
# the flag and the valid names; over-limit errors name the flag that raises the bound.
source "$(dirname "$0")/lib.sh"

cat > "$TMP/three.yaml" <<'YAML'
name: three
gpuModels: [{name: T4, memoryMiB: 15360}]
nodeShapes:
  s: {gpuModel: T4, sockets: [{switches: [1]}]}
nodes: [{namePrefix: n, count: 3, shape: s}]
YAML
"$BERTH" cells --cluster "$TMP/three.yaml" > /dev/null || fail "a 3-node cluster refused"
# Lowered: refused, before or after the subcommand, naming the flag.
expect_error "three.yaml:5:32: nodes[0].count: expected an integer from 1 to 2" \
  "$BERTH" --limit nodes=2 cells --cluster "$TMP/three.yaml"
expect_error "raise it with --limit nodes=N; docs/cluster-file.md, Bounds)" \
  "$BERTH" cells --cluster "$TMP/three.yaml" --limit nodes=2
# Repeated: each applies, the last one of a name wins.
expect_error "more than the limit of 64 bytes" \
  "$BERTH" --limit nodes=2 --limit file-bytes=64 cells --cluster "$TMP/three.yaml"
"$BERTH" --limit nodes=2 --limit nodes=3 cells --cluster "$TMP/three.yaml" > /dev/null ||
  fail "--limit nodes=3 after nodes=2 did not win"

# Raised: a node of 200 GPUs is refused by default and read with --limit gpus-per-node=256.
sed 's/switches: \[1\]/switches: [200]/' "$TMP/three.yaml" > "$TMP/wide.yaml"
expect_error "raise it with --limit gpus-per-node=N" "$BERTH" cells --cluster "$TMP/wide.yaml"
"$BERTH" --limit gpus-per-node=256 cells --cluster "$TMP/wide.yaml" > "$TMP/out" ||
  fail "--limit gpus-per-node=256 refused a 200-GPU node"
grep -q "3 nodes, 600 GPUs" "$TMP/out" || fail "wide cluster: $(head -1 "$TMP/out")"

# Command-line numbers bounded by a limit follow it and name it.
expect_error "--jobs: Value 30 not in range 1 to 20 (raise it with --limit jobs=N" \
  "$BERTH" --limit jobs=20 sim replay --jobs 30
expect_error "--queues: Value 2000 not in range 1 to 1000 (raise it with --limit queues=N" \
  "$BERTH" bench schedule --queues 2000
expect_error "--seeds: more than the limit of 2 seeds (raise it with --limit seeds=N" \
  "$BERTH" --limit seeds=2 sim packing --seeds 1-3
expect_error "/dev/zero: more than the limit of 67108864 bytes (raise it with --limit file-bytes=N" \
  "$BERTH" cells --cluster /dev/zero

# Bad --limit values: exit 2, the flag and the valid names, never a crash.
bad_limit() {
  local want=$1; shift
  local out rc=0
  out=$("$BERTH" "$@" cells --cluster "$TMP/three.yaml" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "expected exit 2 from --limit $*, got $rc: $out"
  grep -qF -- "$want" <<<"$out" || fail "expected '$want' for $*; got: $out"
}
bad_limit '--limit: unknown bound "nodez"; names: file-bytes, yaml-depth' --limit nodez=5
bad_limit '--limit: expected NAME=VALUE' --limit nodes
for v in x 0 -1 1.5 '' 99999999999999999999999 16777217; do
  bad_limit '--limit nodes: expected an integer from 1 to 16777216' --limit "nodes=$v"
done
bad_limit 'the default, is the most berth handles safely' --limit node-cpu-milli=1099511627777
bad_limit 'queues x gpus would be 9000 x 262144' --limit queues=9000
"$BERTH" --limit queues=5000 --limit gpus=100000 cells --cluster "$TMP/three.yaml" > /dev/null ||
  fail "--limit queues=5000 --limit gpus=100000 refused"
"$BERTH" --help | grep -q -- "--limit NAME=VALUE" || fail "--help does not show --limit"
"$BERTH" --help | grep -q "gpus-per-node" || fail "--help does not name the bounds"
echo "1 passed, 0 failed"
