# An agent on a GPU host whose topology the cluster file gets wrong: its discovery (a stand-in
# nvidia-smi printing a captured PCIe L40S server's output; the CPUs and NUMA nodes are this
# host's) is compared with the file's node, and the difference is a node condition (berth
# nodes, GET /v1/nodes), an event and a metric. No Docker engine is needed to register.
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
CLUSTER=$TMP/cluster.yaml start_server
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
echo "topology: ok"
