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
echo "1 passed, 0 failed"
