#!/usr/bin/env bash
# berth sim: packing on the real openb trace (one seed, short) and replay of the Tiresias trace.
source "$(dirname "$0")/lib.sh"
T="data/openb"

"$BERTH" sim packing --nodes "$T/openb_node_list_gpu_node.csv" --pods "$T/openb_pod_list_default.csv" \
  --policy bestfit --seeds 42 --tune 0.6 --json "$TMP/p.json" --svg "$TMP/p.svg" > "$TMP/p.txt"
[ "$(json_get "$TMP/p.json" '.gpus')" = 6212 ] || fail "packing json gpus"
[ "$(json_get "$TMP/p.json" '.policies.bestfit.alloc_ratio | keys | map(tonumber) | max')" = 60 ] ||
  fail "alloc_ratio keys up to the tune"
# Below 60% arrived nearly everything fits: allocation tracks arrival.
[ "$(json_get "$TMP/p.json" '.policies.bestfit.alloc_ratio["50"] - 50 | fabs < 1')" = true ] ||
  fail "alloc ratio at 50% arrived"
grep -q "<svg" "$TMP/p.svg" || fail "svg written"

# Without --nodes and --pods, the bundled trace is found beside the binary or in the source tree
# it was built from, whatever the current directory; never in the binary's parent, which for a
# binary in /tmp/x is a directory anyone can write.
(cd "$TMP" && "$BERTH" sim packing --policy bestfit --seeds 42 --tune 0.2 > "$TMP/default.txt")
grep -q "openb_pod_list_default: 8152 pods on 6212 GPUs" "$TMP/default.txt" ||
  fail "the default trace is data/openb's: $(cat "$TMP/default.txt")"
mkdir -p "$TMP/alone/bin" "$TMP/alone/data/openb" && cp "$BERTH" "$TMP/alone/bin/"
printf 'sn,cpu_milli,memory_mib,gpu,model\nplanted,128000,1048576,1,T4\n' \
  > "$TMP/alone/data/openb/openb_node_list_gpu_node.csv"
"$TMP/alone/bin/berth" sim packing --policy bestfit --seeds 42 --tune 0.2 > "$TMP/parent.txt"
grep -q "8152 pods on 6212 GPUs" "$TMP/parent.txt" ||
  fail "a data/ beside the binary's directory was read: $(cat "$TMP/parent.txt")"
mkdir -p "$TMP/alone/bin/data" && mv "$TMP/alone/data/openb" "$TMP/alone/bin/data/"
cp data/openb/openb_pod_list_default.csv "$TMP/alone/bin/data/openb/"
"$TMP/alone/bin/berth" sim packing --policy bestfit --seeds 42 --tune 0.2 > "$TMP/beside.txt"
grep -q "on 1 GPUs" "$TMP/beside.txt" ||
  fail "the data/ beside the binary was not read first: $(cat "$TMP/beside.txt")"

# A held-out variant of the default trace, with the best packing of the same arrivals beside it
# and the chart's zoomed panel.
"$BERTH" sim packing --variant gpuspec20-d2 --policy fgd,bestfit --seeds 42 --tune 0.5 --bound \
  --json "$TMP/v.json" --svg "$TMP/v.svg" > "$TMP/v.txt"
grep -q "variant gpuspec20-d2 (held out): 8152 pods" "$TMP/v.txt" || fail "variant line: $(cat "$TMP/v.txt")"
[ "$(json_get "$TMP/v.json" '.trace')" = "openb_pod_list_default+gpuspec20-d2" ] || fail "variant trace name"
[ "$(json_get "$TMP/v.json" '.reference.upper_bound["50"] >= .reference.offline_best["50"] and
  .reference.offline_best["50"] >= .policies.bestfit.alloc_ratio["50"] - 1')" = true ] ||
  fail "bound >= offline best, near the policies: $(jq -c .reference "$TMP/v.json")"
[ "$(json_get "$TMP/v.json" '.reference.gap_closed_vs_fgd.bestfit | has("upper_bound")')" = true ] ||
  fail "gap closed vs fgd"
# The lowest bestfit - fgd before 100% arrived, and where: as the curves say.
[ "$(json_get "$TMP/v.json" '.policies as $p | [range(1; 51) | tostring | $p.bestfit.alloc_ratio[.] -
  $p.fgd.alloc_ratio[.]] as $diff | $p.bestfit.lowest_vs_fgd_below_100 as $got |
  ($got.points - ($diff | min) | fabs) < 1e-9 and ($got.points - $diff[$got.at - 1] | fabs) < 1e-9
  and $got.points < 0')" = true ] ||
  fail "lowest vs fgd: $(jq -c .policies.bestfit.lowest_vs_fgd_below_100 "$TMP/v.json")"
grep -q "against fgd before 100% arrived" "$TMP/v.txt" || fail "lowest vs fgd printed"
[ "$(grep -c '<g transform' "$TMP/v.svg")" = 2 ] || fail "two chart panels"
grep -q "zoomed on 85-100% allocated" "$TMP/v.svg" || fail "zoomed panel title"
[ "$("$BERTH" sim variants | grep -c ' held out ')" = 28 ] || fail "28 held-out variants listed"

# Tiresias smoke test: with known durations, shortest-job-first beats FIFO on mean JCT.
printf 'num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,2,4,64,256\n' > "$TMP/small.csv"
"$BERTH" sim replay --cluster "$TMP/small.csv" --trace "data/tiresias/60_job.csv" \
  --format tiresias --policy berth --json "$TMP/fifo.json" > /dev/null
"$BERTH" sim replay --cluster "$TMP/small.csv" --trace "data/tiresias/60_job.csv" \
  --format tiresias --policy berth --sjf --json "$TMP/sjf.json" --report "$TMP/r.html" > /dev/null
fifo=$(json_get "$TMP/fifo.json" '.policies.berth.jct_s.mean')
sjf=$(json_get "$TMP/sjf.json" '.policies.berth.jct_s.mean')
jq -ne "$sjf < $fifo" > /dev/null || fail "SJF ($sjf) should beat FIFO ($fifo)"
grep -q "<svg" "$TMP/r.html" || fail "report has charts"

# A malformed row is named by file, line and column, or skipped when asked.
head -3 "$T/openb_pod_list_default.csv" > "$TMP/pods.csv"
echo "bad-pod,x,1,1,1000,,LS,Running,0,1,0" >> "$TMP/pods.csv"
expect_error "pods.csv:4: column 'cpu_milli'" "$BERTH" sim packing --nodes "$T/openb_node_list_gpu_node.csv" --pods "$TMP/pods.csv" --seeds 1
"$BERTH" sim packing --nodes "$T/openb_node_list_gpu_node.csv" --pods "$TMP/pods.csv" --seeds 1 \
  --policy bestfit --skip-malformed > "$TMP/skip.txt" 2>&1
grep -q "skipped 1 malformed" "$TMP/skip.txt" || fail "skip-malformed counts"
echo "1 passed, 0 failed"
