# An agent on a host whose GPUs NVML answers for, without a DCGM exporter: its GPUs' memory and
# utilization come from NVML each heartbeat, as metrics and for the gpu-memory-threshold plugin.
# NVML here is the fake libnvidia-ml of tests/agent/fake_nvml.cc (a DGX A100; GPU n uses n GiB
# and is busy 10n percent), found by its driver name as the real one is. No engine is needed.
source "$(dirname "$0")/../cli/lib.sh"
AGENT_PID=
stop_agent() {
  [ -z "$AGENT_PID" ] || { kill -9 "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; } || true
}
trap 'stop_agent; stop_server; rm -rf "$TMP"' EXIT

FAKE=$(dirname "$BERTH")/libberth_fake_nvml.so
[ -f "$FAKE" ] || fail "no $FAKE: build the target berth_fake_nvml"
mkdir -p "$TMP/lib"
cp "$FAKE" "$TMP/lib/libnvidia-ml.so.1"
sed 's/dgx-01/n0/' examples/dgx-a100.yaml > "$TMP/cluster.yaml"
CLUSTER=$TMP/cluster.yaml start_server
LD_LIBRARY_PATH="$TMP/lib" "$BERTH" agent --server "http://$BERTH_ADDR" --node n0 \
  --docker-socket "$TMP/no-engine.sock" --heartbeat 0.2 > "$TMP/agent.log" 2>&1 &
AGENT_PID=$!

sampled() {
  local m
  m=$(curl -sf "http://$BERTH_ADDR/metrics") || return 1
  grep -qx 'berth_gpu_memory_used_mib{node="n0",gpu="3"} 3072' <<<"$m" &&
    grep -qx 'berth_gpu_memory_free_mib{node="n0",gpu="3"} 78848' <<<"$m" &&
    grep -qx 'berth_gpu_utilization_percent{node="n0",gpu="7"} 70' <<<"$m" &&
    grep -qx 'berth_gpu_memory_used_mib{node="n0",gpu="0"} 0' <<<"$m"
}
for _ in $(seq 100); do sampled && break; sleep 0.1; done
sampled || fail "no NVML telemetry: $(curl -sf "http://$BERTH_ADDR/metrics" | grep berth_gpu_ || true)
$(cat "$TMP/agent.log")"
grep -q "GPUs found by NVML" "$TMP/agent.log" || fail "not found by NVML: $(cat "$TMP/agent.log")"
# No metric NVML cannot give: SM activity is DCGM's.
! curl -sf "http://$BERTH_ADDR/metrics" | grep -q '^berth_gpu_sm_active_ratio{' ||
  fail "an SM activity without DCGM: $(curl -sf "http://$BERTH_ADDR/metrics" | grep sm_active)"
# A stop shuts NVML down and ends the agent cleanly.
kill -TERM "$AGENT_PID"
for _ in $(seq 100); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.1; done
set +e
wait "$AGENT_PID"
rc=$?
set -e
AGENT_PID=
[ "$rc" = 0 ] || fail "the agent ended with $rc on SIGTERM: $(tail -5 "$TMP/agent.log")"
echo "nvml: ok"
