# An agent on a GPU host whose topology the cluster file gets wrong: its discovery (a stand-in
# nvidia-smi printing a captured PCIe L40S server's output; the CPUs and NUMA nodes are this
# host's) is compared with the file's node, and the difference is a node condition (berth
# nodes, GET /v1/nodes), an event and a metric. No Docker engine is needed to register; the
# agent has none, which is a condition of its own: the node takes no new jobs after a while.
source "$(dirname "$0")/../cli/lib.sh"
AGENT_PID=
stop_agent() {
  [ -z "$AGENT_PID" ] || { kill -9 "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; } || true
}
trap 'stop_agent; stop_server; rm -rf "$TMP"' EXIT

mkdir -p "$TMP/bin"
cat > "$TMP/bin/nvidia-smi" <<EOT
#!/bin/sh
case "\$*" in
  *--query-gpu*) cat "$SRC/tests/data/agent/pcie-l40s/query.csv" ;;
  *topo*) cat "$SRC/tests/data/agent/pcie-l40s/topo.txt" ;;
  *) exit 1 ;;
esac
EOT
chmod +x "$TMP/bin/nvidia-smi"
# The captured server's shape, with socket CPUs no host running this test has.
sed 's/- {name: pcie-01, shape: pcie8}/- {name: n0, shape: pcie8}/' examples/pcie8.yaml |
  sed '/pcie-0[2-9]/d' > "$TMP/cluster.yaml"
CLUSTER=$TMP/cluster.yaml start_server --node-unhealthy-after 2 --node-lost-after 60
PATH="$TMP/bin:$PATH" "$BERTH" agent --server "http://$BERTH_ADDR" --node n0 \
  --docker-socket "$TMP/no-engine.sock" > "$TMP/agent.log" 2>&1 &
AGENT_PID=$!

mismatch() { "$BERTH" nodes --format json | jq -r '.nodes[0].topologyMismatch | length'; }
for _ in $(seq 100); do [ "$(mismatch)" -gt 0 ] && break; sleep 0.1; done
[ "$(mismatch)" -gt 0 ] || fail "no topology condition: $("$BERTH" nodes --format json) $(cat "$TMP/agent.log")"
"$BERTH" nodes --format json | jq -e '.nodes[0].topologyMismatch | all(contains("the cluster file declares"))' > /dev/null ||
  fail "each difference names what the file declares: $("$BERTH" nodes --format json)"
"$BERTH" nodes | grep -qE '^n0: topology differs: .*the cluster file declares' ||
  fail "berth nodes: $("$BERTH" nodes)"
"$BERTH" events | grep -qE 'n0 +topology-mismatch +its agent found another topology than the cluster file declares' ||
  fail "events: $("$BERTH" events)"
metrics=$(curl -sf "http://$BERTH_ADDR/metrics")
grep -qE "^berth_node_topology_mismatches\{node=\"n0\"\} $(mismatch)\$" <<<"$metrics" ||
  fail "metric: $(grep topology <<<"$metrics")"

# No engine behind the agent's socket: said by the node, the metric, an event, and berth run.
engine_error() { "$BERTH" nodes --format json | jq -r '.nodes[0].engineError'; }
for _ in $(seq 100); do [ -n "$(engine_error)" ] && break; sleep 0.1; done
engine_error | grep -q "cannot reach the Docker engine at $TMP/no-engine.sock" ||
  fail "no engine condition: $("$BERTH" nodes --format json)"
"$BERTH" nodes | grep -qE '^n0 .*\(no container engine\)' || fail "berth nodes: $("$BERTH" nodes)"
"$BERTH" nodes | grep -q "^n0: cannot reach the Docker engine" || fail "berth nodes: $("$BERTH" nodes)"
metrics=$(curl -sf "http://$BERTH_ADDR/metrics")
grep -qx 'berth_node_container_engine_up{node="n0"} 0' <<<"$metrics" ||
  fail "metric: $(grep engine <<<"$metrics")"
set +e
out=$("$BERTH" run busybox true 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "agent of node n0 cannot reach its container engine" <<<"$out" &&
  grep -q "start dockerd there" <<<"$out" || fail "berth run without an engine (rc $rc): $out"
for _ in $(seq 100); do "$BERTH" events | grep -qE 'n0 +unhealthy +its agent cannot reach the container engine' && break; sleep 0.1; done
"$BERTH" events | grep -qE 'n0 +unhealthy +its agent cannot reach the container engine \(cannot reach the Docker engine' ||
  fail "no unhealthy event naming the engine: $("$BERTH" events)"
[ "$("$BERTH" nodes --format json | jq -r '.nodes[0] | "\(.agent) \(.cordoned)"')" = "unhealthy true" ] ||
  fail "the node should be unhealthy and cordoned: $("$BERTH" nodes --format json)"
echo "topology: ok"
