#!/usr/bin/env bash
# The benchmarks print their figures in the documented JSON shape (speed is not asserted here).
source "$(dirname "$0")/lib.sh"

"$BERTH" bench alloc --iterations 200 --json > "$TMP/alloc.json"
[ "$(json_get "$TMP/alloc.json" '" ".join(r["name"] for r in d["results"])')" = \
  "alloc-1gpu alloc-2gpu alloc-4gpu alloc-8gpu alloc-gang64 alloc-share alloc-mig" ] ||
  fail "bench alloc scenario names"
[ "$(json_get "$TMP/alloc.json" 'all(r["ns_per_op"] > 0 and r["failed"] == 0 for r in d["results"])')" = True ] ||
  fail "every scenario timed and placed"

"$BERTH" bench schedule --jobs 300 --json > "$TMP/schedule.json"
[ "$(json_get "$TMP/schedule.json" 'd["jobs"] == 300 and d["decisions_per_sec"] > 0 and d["p99_us"] >= d["p50_us"] > 0')" = True ] ||
  fail "bench schedule figures"
echo "1 passed, 0 failed"
