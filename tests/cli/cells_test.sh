#!/usr/bin/env bash
# berth cells: counts and tree in JSON and text, for each example and the openb node list.
source "$(dirname "$0")/lib.sh"

"$BERTH" cells --format json > "$TMP/default.json"
[ "$(json_get "$TMP/default.json" '.nodes')" = 16 ] || fail "embedded default: 16 nodes"
[ "$(json_get "$TMP/default.json" '.gpus')" = 128 ] || fail "embedded default: 128 GPUs"
[ "$(json_get "$TMP/default.json" '.tree.gpus')" = 128 ] || fail "tree root holds 128 GPUs"

"$BERTH" cells --cluster examples/dgx-a100.yaml --format json > "$TMP/dgx.json"
[ "$(json_get "$TMP/dgx.json" '.gpus')" = 8 ] || fail "dgx: 8 GPUs"
[ "$(json_get "$TMP/dgx.json" '[.types[].name] | sort | join(",")')" = \
  "A100-80GB,cluster,dgx-a100/node,dgx-a100/socket,dgx-a100/switch" ] ||
  fail "dgx cell types"

"$BERTH" cells --cluster examples/multi-rack.yaml --vcs examples/vcs.yaml > "$TMP/vcs.txt"
grep -q "research: dgx-a100/node 2/0/2" "$TMP/vcs.txt" || fail "VC line for research"

"$BERTH" cells --cluster "data/openb/openb_node_list_gpu_node.csv" --format json > "$TMP/openb.json"
[ "$(json_get "$TMP/openb.json" '.nodes')" = 1213 ] || fail "openb: 1213 nodes"
[ "$(json_get "$TMP/openb.json" '.gpus')" = 6212 ] || fail "openb: 6212 GPUs"

for f in examples/pcie8.yaml examples/h100-mig.yaml examples/fleet-10k.yaml; do
  "$BERTH" cells --cluster "$f" > /dev/null || fail "cells on $f"
done
echo "1 passed, 0 failed"
