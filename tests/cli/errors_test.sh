#!/usr/bin/env bash
# Bad input exits non-zero with an error naming the file, the line and the field; no crash.
source "$(dirname "$0")/lib.sh"

cat > "$TMP/unknown-field.yaml" <<'YAML'
name: bad
gpuModels:
  - {name: T4, memoryMiB: 15360, colour: red}
YAML
expect_error "unknown-field.yaml:3:34: gpuModels[0]: unknown field" "$BERTH" cells --cluster "$TMP/unknown-field.yaml"
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
expect_error 'trace.yaml:4:14: events[0]: unknown field "fail_gpu"' "$BERTH" sim replay \
  --format berth --trace "$TMP/trace.yaml"
sed -i 's/fail_gpu/failGpu/; s/gpu: 0/gpu: 8/' "$TMP/trace.yaml"
expect_error "trace.yaml:4:44: events[0].failGpu.gpu: expected an integer from 0 to 7" \
  "$BERTH" sim replay --format berth --trace "$TMP/trace.yaml"
expect_error "queues: the trace has its own queues" "$BERTH" sim replay --format berth \
  --trace examples/scenarios/2-shares-settle.yaml --cluster examples/scenarios/clusters/dgx-4.yaml \
  --vcs examples/vcs.yaml

# Hostile and broken input (issue 10): bounded, clear errors naming file, line and field; never a
# crash, a hang or nonsense with exit 0. Small inputs of their own, no traces needed.
printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,8,T4\nn2,32000,65536,8,T4\n' > "$TMP/n.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,1000\np2,1000,1024,2,1000\n' \
  > "$TMP/p.csv"
pack() { timeout 20 "$BERTH" sim packing --nodes "$TMP/n.csv" --pods "$TMP/p.csv" "$@"; }
expect_error "--candidates: Value -1 not in range" pack --candidates -1
expect_error "--policy: expected policy names separated by commas" pack --policy ''
expect_error "--policy: expected policy names" pack --policy fgd,,berth
expect_error '--policy: two policies are named "fgd"' pack --policy fgd,fgd
expect_error '--seeds: expected whole numbers' pack --seeds 42abc
expect_error '--seeds: expected whole numbers' pack --seeds 1.9
expect_error '--seeds: seed 3 is given twice' pack --seeds 1-3,3
expect_error '--seeds: more than the limit of 10000 seeds' pack --seeds 0-18446744073709551615
# The largest seed ends its range instead of wrapping around to 0 forever.
pack --seeds 18446744073709551614-18446744073709551615 > "$TMP/out" || fail "top seeds refused"
grep -q "2 seed(s)" "$TMP/out" || fail "top seeds: $(cat "$TMP/out")"
printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,0,\n' > "$TMP/cpu-only.csv"
expect_error "cpu-only.csv:2: column 'gpu': no node has GPUs" "$BERTH" sim packing --nodes "$TMP/cpu-only.csv" \
  --pods "$TMP/p.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,0,0\n' > "$TMP/cpu-pods.csv"
expect_error "cpu-pods.csv:2: column 'num_gpu': no pod asks for GPUs" timeout 20 "$BERTH" sim packing \
  --nodes "$TMP/n.csv" --pods "$TMP/cpu-pods.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np\xff,1000,1024,1,1000\n' > "$TMP/utf8.csv"
expect_error "utf8.csv:2:2: invalid UTF-8 (byte 0xFF)" "$BERTH" sim packing --nodes "$TMP/n.csv" \
  --pods "$TMP/utf8.csv" --json "$TMP/j"

replay() { timeout 20 "$BERTH" sim replay --jobs 20 "$@"; }
expect_error "--policy: expected policy names" replay --policy ''
for load in 0 -1 nan inf 11 1e-10; do expect_error "--load: expected a number from 0.01 to 10" replay --load $load; done
for c in 0 -5 nan; do expect_error "--checkpoint: expected seconds above 0" replay --checkpoint $c; done
expect_error "--jobs: Value 2000000000 not in range 1 to 1000000" replay --jobs 2000000000
expect_error "--queues: Value 2147483647 not in range 1 to 1000" \
  "$BERTH" bench schedule --queues 2147483647
H='job_id,num_gpu,submit_time,iterations,model_name,duration,interval'
for t in nan inf 1e999 -1; do
  printf '%s\n0,1,%s,1,vgg,60,1\n' "$H" "$t" > "$TMP/jobs.csv"
  expect_error "jobs.csv:2: column 'submit_time': expected a number from 0 to 1000000000" \
    replay --format tiresias --trace "$TMP/jobs.csv"
done
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1,1,1,1000,,LS,Running,5,,\n' \
  > "$TMP/untimed.csv"
expect_error "untimed.csv:2: no pod has both a submit time and a duration" \
  replay --format openb --trace "$TMP/untimed.csv"

# Files: a device or a directory is not read whole; an empty or BOM-led CSV is told apart.
expect_error "/dev/zero: more than the limit of 67108864 bytes" "$BERTH" cells --cluster /dev/zero
expect_error "$TMP: cannot read: it is a directory" "$BERTH" cells --cluster "$TMP"
# Pods no node can hold: a refusal naming the first, not a table of zeros.
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\nbig,1000,1024,64,1000\n' > "$TMP/big-pods.csv"
expect_error "big-pods.csv: no pod fits any node of" "$BERTH" sim packing --seeds 1 \
  --pods "$TMP/big-pods.csv"
expect_error "the first, big: no node of the cluster can ever hold" "$BERTH" sim packing \
  --seeds 1 --pods "$TMP/big-pods.csv"
# An output path that cannot be written is refused before the run, not after it.
expect_error "--json: cannot write /nonexistent/x.json: No such file or directory" \
  "$BERTH" sim replay --jobs 20 --json /nonexistent/x.json
expect_error "--report: cannot write $TMP: Is a directory" \
  "$BERTH" sim replay --jobs 20 --report "$TMP"
# A named pipe nobody writes to is empty, not a hang; one being written is read whole.
mkfifo "$TMP/pipe.yaml"
expect_error "pipe.yaml:1:1: the file holds no YAML document" timeout 20 "$BERTH" cells \
  --cluster "$TMP/pipe.yaml"
timeout 20 "$BERTH" cells --cluster <(cat examples/dgx-a100.yaml) | grep -q "dgx-a100" ||
  fail "a cluster file written through a pipe is not read"
: > "$TMP/empty.csv"
expect_error "empty.csv:1: expected the header of an openb node list" \
  "$BERTH" cells --cluster "$TMP/empty.csv"
C='num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node'
printf '\xef\xbb\xbf%s\r\n1,2,4,8,16\r\n' "$C" > "$TMP/bom.csv"
"$BERTH" cells --cluster "$TMP/bom.csv" > /dev/null || fail "a Tiresias cluster with a BOM refused"
printf '%s\n1,2,4,8,16\n2,2,2,2,2\n' "$C" > "$TMP/rows.csv"
expect_error "rows.csv:3: a second cluster row" "$BERTH" cells --cluster "$TMP/rows.csv"
printf '%s\n10000,10000,64,64,256\n' "$C" > "$TMP/huge.csv"
expect_error "huge.csv:2: the cluster would have more than the limit of 100000 nodes" \
  "$BERTH" cells --cluster "$TMP/huge.csv"
printf '%s\n1,2,0,8,16\n' "$C" > "$TMP/no-gpus.csv"
expect_error "no-gpus.csv:2: column 'num_gpu_p_node': expected an integer from 1 to 128" "$BERTH" sim replay --cluster "$TMP/no-gpus.csv" \
  --vcs examples/vcs.yaml

# YAML: one document, bounded expansion, located duplicates, VC refusals at their line.
printf 'name: t\n---\nbogus: 1\n' > "$TMP/two-docs.yaml"
expect_error "two-docs.yaml:2:1: a second YAML document" "$BERTH" cells --cluster "$TMP/two-docs.yaml"
cat > "$TMP/count.yaml" <<'YAML'
name: big
gpuModels: [{name: T4, memoryMiB: 15360}]
nodeShapes:
  s: {gpuModel: T4, sockets: [{cpus: "0-65535", switches: [1]}]}
nodes: [{namePrefix: n, count: 100000, shape: s}]
YAML
expect_error "count.yaml:5:32: nodes[0].count: the cluster would have more than the limit of 32000000 CPU ids" \
  "$BERTH" cells --cluster "$TMP/count.yaml"
printf 'name: t\nracks:\n  - {name: r}\n  - {name: r}\n' > "$TMP/racks.yaml"
expect_error "racks.yaml:4:12: racks[1].name: rack \"r\" is already declared at $TMP/racks.yaml:3:12;" \
  "$BERTH" cells --cluster "$TMP/racks.yaml"
printf 'virtualClusters:\n  a: {guarantees: {dgx-a100/node: 8}}\n  b:\n    guarantees: {nope: 1}\n' \
  > "$TMP/vcs.yaml"
expect_error 'vcs.yaml:4:18: virtualClusters.b: unknown cellType "nope"' "$BERTH" cells --vcs "$TMP/vcs.yaml"
expect_error 'vcs.yaml:4:18: virtualClusters.b: unknown cellType "nope"' replay --vcs "$TMP/vcs.yaml"
printf 'virtualClusters:\n  a: {guarantees: {dgx-a100/node: 8}}\n  b: {guarantees: {dgx-a100/node: 8}}\n' \
  > "$TMP/vcs.yaml"
expect_error 'vcs.yaml:3:20: virtualClusters: the guarantees ask for 16 x dgx-a100/node' \
  replay --vcs "$TMP/vcs.yaml"

# A trace given to a synthetic replay would be silently ignored.
expect_error "--trace: a synthetic replay makes its own jobs" "$BERTH" sim replay \
  --trace examples/scenarios/2-shares-settle.yaml
# A cluster named after its file is printed: control characters in the name are not.
C='num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node'
printf '%s\n1,1,2,8,16\n' "$C" > "$TMP/$(printf 'esc\033[31m')".csv
"$BERTH" cells --cluster "$TMP/$(printf 'esc\033[31m')".csv | head -1 | grep -q 'cluster esc?\[31m:' ||
  fail "a control character of a file name reached the output"

# Figures wider than their column (jobs of 31 years) stay apart: 10 columns, not run together.
printf 'jobs:\n  - {name: a, submit: 0, duration: 999999999, gpus: 1}\n' > "$TMP/long.yaml"
row=$("$BERTH" sim replay --format berth --trace "$TMP/long.yaml" | grep '^berth ')
[ "$(wc -w <<<"$row")" -eq 10 ] || fail "replay table columns run together: $row"

# What a container cannot be given is refused before any server is asked (none runs here).
expect_exit2 "--cpus: a container takes at least 0.01" run --cpus 0.001 busybox true
expect_exit2 "--cpus: a container takes at least 0.01" run --cpus nan busybox true
# NaN passes any range check by comparison (review: top redrew without pause).
expect_exit2 "--interval: Value nan is not from 0.2 to 3600" top --interval nan
expect_exit2 "--heartbeat: Value nan is not from 0.1 to 60" agent --server http://127.0.0.1:1 --node n --heartbeat nan
expect_exit2 "--interval: Value 0.1 is not from 0.2 to 3600" top --interval 0.1
expect_exit2 "-f: the file gives the whole job; put --gpus, -e in it as fields" run -f /dev/null --gpus 2 -e A=1
expect_exit2 "--memory: a container takes at least 6m" run --memory 1m busybox true
# A follower whose server is gone says so rather than wait in silence (here, none ever was).
BERTH_ADDR=127.0.0.1:9 "$BERTH" logs -f 1 > "$TMP/follow.out" 2>&1 &
follower=$!
for _ in $(seq 300); do
  grep -qF "berth: no server at 127.0.0.1:9" "$TMP/follow.out" && break
  sleep 0.1
done
kill "$follower"
wait "$follower" 2>/dev/null || true
grep -qF "berth: no server at 127.0.0.1:9" "$TMP/follow.out" ||
  fail "berth logs -f waited in silence: $(cat "$TMP/follow.out")"
echo "1 passed, 0 failed"
