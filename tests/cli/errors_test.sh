#!/usr/bin/env bash
# Bad input exits non-zero with an error naming the file, the line and the field; no crash.
source "$(dirname "$0")/lib.sh"

cat > "$TMP/unknown-field.yaml" <<'YAML'
name: bad
gpuModels:
  - {name: T4, memoryMiB: 15360, colour: red}
YAML
expect_error "unknown-field.yaml:3" "$BERTH" cells --cluster "$TMP/unknown-field.yaml"
expect_error "colour" "$BERTH" cells --cluster "$TMP/unknown-field.yaml"

cat > "$TMP/cycle.yaml" <<'YAML'
name: cycle
cellTypes:
  A: {childCellType: B, childCellNumber: 2}
  B: {childCellType: A, childCellNumber: 2, isNodeLevel: true}
physicalCells:
  - {cellType: A, cellAddress: a}
YAML
expect_error "cycle" "$BERTH" cells --cluster "$TMP/cycle.yaml"

cat > "$TMP/two-switches.yaml" <<'YAML'
name: two-switches
gpuModels: [{name: T4, memoryMiB: 15360}]
nodeShapes:
  box:
    gpuModel: T4
    sockets:
      - cpus: "0-7"
        memoryMiB: 65536
        switches: [{gpus: [0, 1]}, {gpus: [1]}]
nodes: [{name: n1, shape: box}]
YAML
expect_error "two-switches.yaml:" "$BERTH" cells --cluster "$TMP/two-switches.yaml"

cat > "$TMP/big-vc.yaml" <<'YAML'
virtualClusters:
  greedy: {guarantees: {dgx-a100/node: 99}}
YAML
expect_error "dgx-a100/node" "$BERTH" cells --cluster examples/multi-rack.yaml --vcs "$TMP/big-vc.yaml"

cat > "$TMP/mig.yaml" <<'YAML'
name: mig
gpuModels: [{name: A100-80GB, memoryMiB: 81920, mig: builtin}]
nodeShapes:
  box:
    gpuModel: A100-80GB
    mig: {enabled: true, layout: ["4g.40gb", "4g.40gb"]}
    sockets: [{cpus: "0-7", memoryMiB: 65536, switches: [1]}]
nodes: [{name: n1, shape: box}]
YAML
expect_error "mig.yaml:" "$BERTH" cells --cluster "$TMP/mig.yaml"

printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,x,T4\n' > "$TMP/nodes.csv"
expect_error "nodes.csv:2: column 'gpu'" "$BERTH" cells --cluster "$TMP/nodes.csv"
expect_error "cannot read" "$BERTH" cells --cluster "$TMP/missing.yaml"
T="data/openb"
expect_error "unknown policy" "$BERTH" sim packing --nodes "$T/openb_node_list_gpu_node.csv" \
  --pods "$T/openb_pod_list_default.csv" --policy nope
expect_error "--seeds" "$BERTH" sim packing --nodes "$T/openb_node_list_gpu_node.csv" \
  --pods "$T/openb_pod_list_default.csv" --seeds 9-1
cat > "$TMP/trace.yaml" <<'YAML'
jobs:
  - {name: j, submit: 0, duration: 60, gpus: 1}
events:
  - {at: 10, fail_gpu: {node: dgx-a-0, gpu: 0}}
YAML
expect_error 'trace.yaml:4: events[0]: unknown field "fail_gpu"' "$BERTH" sim replay \
  --format berth --trace "$TMP/trace.yaml"
sed -i 's/fail_gpu/failGpu/; s/gpu: 0/gpu: 8/' "$TMP/trace.yaml"
expect_error "trace.yaml:4: events[0].failGpu.gpu: expected an integer from 0 to 7" \
  "$BERTH" sim replay --format berth --trace "$TMP/trace.yaml"
expect_error "queues: the trace has its own queues" "$BERTH" sim replay --format berth \
  --trace examples/scenarios/2-shares-settle.yaml --cluster examples/scenarios/clusters/dgx-4.yaml \
  --vcs examples/vcs.yaml
echo "1 passed, 0 failed"
