#!/usr/bin/env bash
# sim replay and jobs that no node of the cluster can ever hold: some of them, a warning that
# counts them and names the first one's reason; all of them, a refusal (exit 2) naming the
# trace, the first job's reason and what to change, instead of a table of zeros.
source "$(dirname "$0")/lib.sh"
C=examples/scenarios/clusters/dgx-4.yaml  # 4 nodes of 8 GPUs

cat > "$TMP/some.yaml" <<'YAML'
queues:
  team:
jobs:
  - {name: small, queue: team, submit: 0, duration: 100, gpus: 4}
  - {name: too-big, queue: team, submit: 0, duration: 100, gpus: 16}
YAML
"$BERTH" sim replay --cluster "$C" --format berth --trace "$TMP/some.yaml" --json "$TMP/some.json" \
  > "$TMP/out" 2> "$TMP/err" || fail "a trace with one job that never fits is refused: $(cat "$TMP/err")"
grep -qF "warning: 1 of 2 jobs of $TMP/some.yaml can never fit on $C" "$TMP/err" ||
  fail "no warning of the job that never fits: $(cat "$TMP/err")"
grep -qF "the first, too-big: no node of the cluster can ever hold" "$TMP/err" ||
  fail "the warning names the first job and its reason: $(cat "$TMP/err")"
[ "$(json_get "$TMP/some.json" '.policies.berth.never_fit')" = 1 ] || fail "never_fit in the JSON"

cat > "$TMP/none.yaml" <<'YAML'
queues:
  team:
jobs:
  - {name: too-big, queue: team, submit: 0, duration: 100, gpus: 16}
  - {name: too-big-2, queue: team, submit: 5, duration: 100, gpus: 9}
YAML
expect_exit2 "$TMP/none.yaml:4:5: none of its 2 jobs can ever fit on $C; the first, too-big: " \
  sim replay --cluster "$C" --format berth --trace "$TMP/none.yaml"
expect_exit2 "Give a cluster whose nodes can hold the jobs (--cluster) or change the trace" \
  sim replay --cluster "$C" --format berth --trace "$TMP/none.yaml"

# An openb pod asking for more CPU than any node of the default cluster has.
printf '%s\n' "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time" \
  "p0,999000000,1000,1,1000,,LS,Running,0,100,0" > "$TMP/pods.csv"
expect_exit2 "$TMP/pods.csv:2: none of its 1 jobs can ever fit on the default cluster" \
  sim replay --format openb --trace "$TMP/pods.csv"

# Synthetic jobs on explicit cells without a SKU: nodes without CPU or memory hold no job.
cat > "$TMP/no-sku.yaml" <<'YAML'
name: h
cellTypes:
  A: {childCellType: K80, childCellNumber: 2}
  B: {childCellType: A, childCellNumber: 2}
  C: {childCellType: B, childCellNumber: 2, isNodeLevel: true}
  D: {childCellType: C, childCellNumber: 2}
physicalCells:
  - {cellType: D, cellChildren: [{cellAddress: x}, {cellAddress: y}]}
YAML
expect_exit2 "the synthetic trace: none of its 20 jobs can ever fit on $TMP/no-sku.yaml" \
  sim replay --cluster "$TMP/no-sku.yaml" --jobs 20
echo "1 passed, 0 failed"
