# Telemetry with the heartbeats: a DCGM exporter's exposition (a real-format capture served on
# loopback) reaches the server's metrics and its gpu-memory-threshold filter (a GPU whose memory
# is nearly full takes no job), and a busy container's cgroup shows as CPU contention.
source "$(dirname "$0")/../cli/lib.sh"
source "$SRC/tests/docker/dockerd.sh"
DK=$(mktemp -d /tmp/berth-tel.XXXXXX)
AGENT= HTTPD=
trap 'kill -9 $AGENT $HTTPD 2>/dev/null || true; wait $AGENT $HTTPD 2>/dev/null || true; stop_server; stop_dockerd; rm -rf "$TMP"' EXIT
start_dockerd "$DK"
build_test_image berth-test:1

# The exporter: busybox httpd serving the capture (GPU 0 holds 77,303 MiB, GPU 1 none).
mkdir -p "$TMP/www"
cp tests/data/agent/dcgm/metrics.txt "$TMP/www/metrics"
serve_dir "$TMP/www"
port=$HTTPD_PORT

export CLUSTER=tests/agent/data/one.yaml
start_server
"$BERTH" agent --server "http://$BERTH_ADDR" --node n0 --declare "$CLUSTER" \
  --docker-socket "$DOCKER_SOCK" --heartbeat 0.2 --dcgm-url "http://127.0.0.1:$port/metrics" \
  >> "$TMP/agent.log" 2>&1 &
AGENT=$!
metrics() { curl -sf "http://$BERTH_ADDR/metrics"; }
gpus_seen() {
  local m; m=$(metrics) || return 1
  grep -qx 'berth_gpu_memory_used_mib{node="n0",gpu="0"} 77303' <<<"$m" &&
    grep -qx 'berth_gpu_memory_used_mib{node="n0",gpu="1"} 0' <<<"$m"
}
for _ in $(seq 300); do gpus_seen && break; sleep 0.1; done
gpus_seen || fail "GPUs 0 and 1's memory should be in the metrics: $(metrics | grep '^berth_gpu_'; cat "$TMP/agent.log")"
# NVLink and PCIe traffic too (DCGM's NVLink counter, and its PCIe rates).
m=$(metrics)
for want in 'berth_gpu_nvlink_bandwidth_total{node="n0",gpu="0"} 189234567' \
  'berth_gpu_pcie_transmit_bytes_per_second{node="n0",gpu="0"} 412345678' \
  'berth_gpu_pcie_receive_bytes_per_second{node="n0",gpu="1"} 2048'; do
  grep -qxF "$want" <<<"$m" || fail "the metrics should have $want: $(grep '^berth_gpu_' <<<"$m")"
done
grep -qx '# TYPE berth_gpu_nvlink_bandwidth_total counter' <<<"$m" || fail "NVLink's is a counter"

# Four 1-GPU jobs on four GPUs, one of them nearly full: three run, one waits.
busy='while true; do :; done'
for _ in 1 2 3 4; do "$BERTH" run -d --gpus 1 --cpus 0.2 berth-test:1 sh -c "$busy" > /dev/null; done
for _ in $(seq 150); do
  [ "$("$BERTH" ps --format json | jq '[.[] | select(.state=="running")] | length')" -eq 3 ] && break
  sleep 0.1
done
"$BERTH" ps --format json | jq -e '[.[] | select(.state=="running")] | length == 3' > /dev/null ||
  fail "three jobs should run: $("$BERTH" ps)"
"$BERTH" ps --format json | jq -e '[.[] | select(.state=="pending")] | length == 1' > /dev/null ||
  fail "one job should wait for the full GPU: $("$BERTH" ps)"
"$BERTH" ps --format json | jq -e 'all(.[]; all(.gpus[]; . != "n0/0"))' > /dev/null ||
  fail "no job may hold the nearly full GPU 0: $("$BERTH" ps)"

# A container spinning on a fifth of a CPU is measured from its cgroup and graded. (How high
# depends on how busy the machine is; the thresholds are unit-tested in cgroup_stats_test.)
graded() {
  local m; m=$(metrics) || return 1
  grep -q '^berth_container_contention{job="1",replica="0",resource="cpu"} [123]$' <<<"$m" &&
    grep -q '^berth_container_cpu_quota_percent{job="1",replica="0"} [1-9]' <<<"$m"
}
for _ in $(seq 300); do graded && break; sleep 0.1; done
graded || fail "busy containers should be graded on CPU: $(metrics | grep '^berth_container')"
# Its cgroup's counters too: spinning on a fifth of a CPU, it is throttled; it uses memory.
# With them and the GPUs' series, the whole exposition passes promtool's lint.
throttled() {
  local m; m=$(metrics) || return 1
  grep -Eq '^berth_container_cpu_throttled_periods_total\{job="1",replica="0"\} [1-9]' <<<"$m" &&
    grep -Eq '^berth_container_cpu_throttled_seconds_total\{job="1",replica="0"\} [0-9.e+-]+$' <<<"$m" &&
    grep -Eq '^berth_container_memory_bytes\{job="1",replica="0"\} [1-9]' <<<"$m"
}
for _ in $(seq 100); do throttled && break; sleep 0.1; done
throttled || fail "job 1's cgroup counters should be in the metrics: $(metrics | grep '^berth_container')"
lint=$(metrics | promtool check metrics 2>&1) || fail "promtool check metrics: $lint"
"$BERTH" inspect 1 | jq -e '.replicas[0].contention | .memoryBytes > 0 and .cpuThrottledPeriods > 0 and .cpuThrottledSeconds >= 0' > /dev/null ||
  fail "inspect should show the cgroup's counters: $("$BERTH" inspect 1)"
"$BERTH" inspect 1 | jq -e '.replicas[0].contention.cpuPercent > 0 and .replicas[0].contention.cpu != "unknown"' > /dev/null ||
  fail "inspect should show the contention: $("$BERTH" inspect 1)"
# Its network counters are read from its namespace (the test engine gives containers no
# network but lo, which is not counted: 0, where -1 would mean not found).
"$BERTH" inspect 1 | jq -e '.replicas[0].network.rxBytes == 0 and .replicas[0].network.txBytes == 0' > /dev/null ||
  fail "inspect should show the network bytes: $("$BERTH" inspect 1)"
counted() {  # (grep -q on a pipe would end curl early: a failure under pipefail)
  local m; m=$(metrics) || return 1
  grep -q '^berth_container_network_receive_bytes_total{job="1",replica="0"} 0$' <<<"$m"
}
for _ in $(seq 50); do counted && break; sleep 0.1; done
counted || fail "network metrics: $(metrics | grep '^berth_container_network')"
# An exporter that answers without end (a CGI trickling a line every half second) delays no
# report: the scrape has a thread of its own and gives up after 2 s (review: the heartbeat
# waited on the scrape, the node went lost, its job ran twice; later each report still waited
# the scrape's 2 s).
kill -9 "$AGENT" "$HTTPD"; wait "$AGENT" "$HTTPD" 2>/dev/null || true
mkdir -p "$TMP/endless/cgi-bin"
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\nfor i in $(seq 40); do echo "# more"; sleep 0.5; done\n' \
  > "$TMP/endless/cgi-bin/metrics"
chmod +x "$TMP/endless/cgi-bin/metrics"
serve_dir "$TMP/endless"
: > "$TMP/agent.log"
"$BERTH" agent --server "http://$BERTH_ADDR" --node n0 --declare "$CLUSTER" \
  --docker-socket "$DOCKER_SOCK" --heartbeat 0.2 \
  --dcgm-url "http://127.0.0.1:$HTTPD_PORT/cgi-bin/metrics" >> "$TMP/agent.log" 2>&1 &
AGENT=$!
for _ in $(seq 100); do grep -q "does not answer within 2 s" "$TMP/agent.log" && break; sleep 0.1; done
grep -q "does not answer within 2 s" "$TMP/agent.log" ||
  fail "the agent should say the exporter does not answer in time: $(cat "$TMP/agent.log")"
oldest=0
for _ in $(seq 16); do
  age=$("$BERTH" nodes --format json | jq '.nodes[0].heartbeatAgeSeconds')
  oldest=$(jq -n "[$oldest, $age] | max")
  sleep 0.5
done
jq -e -n "$oldest < 1.8" > /dev/null ||
  fail "with an endless exporter the node's reports came $oldest s apart: $(cat "$TMP/agent.log")"
"$BERTH" nodes | grep -q ' ready' || fail "the node should stay ready: $("$BERTH" nodes)"
echo "telemetry: ok"
