#!/usr/bin/env bash
# The benchmarks print their figures in the documented JSON shape (speed is not asserted here).
source "$(dirname "$0")/lib.sh"

"$BERTH" bench alloc --iterations 200 --json > "$TMP/alloc.json"
[ "$(json_get "$TMP/alloc.json" '[.results[].name] | join(" ")')" = \
  "alloc-1gpu alloc-2gpu alloc-4gpu alloc-8gpu alloc-gang64 alloc-share alloc-mig" ] ||
  fail "bench alloc scenario names"
[ "$(json_get "$TMP/alloc.json" 'all(.results[]; .ns_per_op > 0 and .failed == 0)')" = true ] ||
  fail "every scenario timed and placed"

"$BERTH" bench schedule --jobs 300 --json > "$TMP/schedule.json"
[ "$(json_get "$TMP/schedule.json" '.jobs == 300 and .decisions_per_sec > 0 and .p99_us >= .p50_us and .p50_us > 0')" = true ] ||
  fail "bench schedule figures"

"$BERTH" bench schedule --jobs 100 --pending 500 --json > "$TMP/deep.json"
[ "$(json_get "$TMP/deep.json" '.pending >= 490 and (.pending | floor) == .pending and .cycle_ms_p99 >= .cycle_ms_p50 and .cycle_ms_p50 > 0')" = true ] ||
  fail "bench schedule --pending figures"
"$BERTH" bench schedule --pending 100001 > "$TMP/out" 2>&1 && fail "--pending above 100000 accepted"

# Mixed node shapes: each queue's guarantee counts the nodes of each shape on their own (the
# first node's shape is not the cluster's).
cat > "$TMP/mixed.yaml" <<'YAML'
name: mixed
gpuModels: [{name: A100, memoryMiB: 81920}]
nodeShapes:
  a:
    gpuModel: A100
    sockets: [{cpus: "0-63", memoryMiB: 1048576, switches: [8]}]
  b:
    gpuModel: A100
    sockets: [{cpus: "0-63", memoryMiB: 1048576, switches: [4]}]
nodes:
  - {name: first, shape: a}
  - {namePrefix: n-, count: 20, shape: b}
YAML
for queues in 1 2 10; do
  "$BERTH" bench schedule --cluster "$TMP/mixed.yaml" --queues "$queues" --jobs 50 --json \
    > "$TMP/mixed.json" || fail "bench schedule refused a mixed-shape cluster (--queues $queues)"
  [ "$(json_get "$TMP/mixed.json" '.placed > 0')" = true ] || fail "mixed shapes: nothing placed"
done
# bench k8s: the extender's verbs over HTTP and in process, every call answered.
"$BERTH" bench k8s --nodes 40 --calls 20 --json > "$TMP/k8s.json" || fail "bench k8s failed"
[ "$(json_get "$TMP/k8s.json" '.failed_calls')" = 0 ] || fail "bench k8s: failed calls: $(cat "$TMP/k8s.json")"
[ "$(json_get "$TMP/k8s.json" '.http_filter.calls')" = 10 ] || fail "bench k8s: $(cat "$TMP/k8s.json")"
[ "$(json_get "$TMP/k8s.json" '.pods_placed > 20')" = true ] || fail "bench k8s placed too few: $(cat "$TMP/k8s.json")"
echo "1 passed, 0 failed"
