#!/usr/bin/env bash
# GET /metrics of a real berth server (docs/api.md, "Metrics"): the exposition passes
# `promtool check metrics` (lint included), its series say what the server holds, route labels
# stay bounded under random URLs, and a real Prometheus scrapes it: a berth series read back
# through Prometheus' query API has the value the server reports. Needs promtool, prometheus
# and curl (scripts/install-deps.sh).
source "$(dirname "$0")/lib.sh"

PROM=
trap '[ -z "$PROM" ] || kill "$PROM" 2>/dev/null; stop_server; rm -rf "$TMP"' EXIT

for tool in promtool prometheus curl; do
  command -v "$tool" > /dev/null || fail "$tool is missing: run scripts/install-deps.sh as root"
done

start_server

# metric TEXT SERIES: the value of the series (its exact name and labels) in the exposition.
metric() { awk -v s="$2" '$1 == s { print $2 }' <<<"$1"; }

a=$("$BERTH" run -d --name big --gpus 8 trainer:1)
b=$("$BERTH" run -d --name small --gpus 2 trainer:1)
c=$("$BERTH" run -d --name gone --gpus 1 trainer:1)
wait_state "$a" scheduled
wait_state "$b" scheduled
wait_state "$c" scheduled
"$BERTH" stop "$c" > /dev/null
# Paths no route serves, ids that no job has and a made-up method: labelled by pattern and known
# method, never by what the client sent.
for i in $(seq 20); do
  curl -s -o /dev/null "http://$BERTH_ADDR/random-$RANDOM-$i"
  curl -s -o /dev/null "http://$BERTH_ADDR/v1/jobs/99$i"
done
curl -s -o /dev/null -X BREW "http://$BERTH_ADDR/coffee"

curl -s -D "$TMP/headers" -o "$TMP/metrics" "http://$BERTH_ADDR/metrics" ||
  fail "GET /metrics failed"
grep -qi '^content-type: text/plain; version=0.0.4' "$TMP/headers" ||
  fail "the content type is not the text format 0.0.4: $(cat "$TMP/headers")"
rc=0
lint=$(promtool check metrics < "$TMP/metrics" 2>&1) || rc=$?
[ "$rc" -eq 0 ] && [ -z "$lint" ] ||
  fail "promtool check metrics (exit $rc): $lint; the exposition: $(cat "$TMP/metrics")"
m=$(cat "$TMP/metrics")

# Every metric is berth_*: the names of every sample line.
others=$(grep -v '^#' <<<"$m" | grep -v '^berth_' || true)
[ -z "$others" ] || fail "series not named berth_*: $others"
[ "$(metric "$m" 'berth_jobs{state="scheduled"}')" = 2 ] || fail "scheduled jobs: $m"
[ "$(metric "$m" 'berth_jobs{state="stopped"}')" = 1 ] || fail "stopped jobs: $m"
[ "$(metric "$m" 'berth_jobs{state="lost"}')" = 0 ] || fail "a state with no job is not 0: $m"
allocated=$(awk '/^berth_gpus\{.*state="allocated"\}/ { n += $2 } END { print n }' <<<"$m")
[ "$allocated" = 10 ] || fail "allocated GPUs: $allocated, not 10: $m"
free=$(awk '/^berth_gpus\{.*state="free"\}/ { n += $2 } END { print n }' <<<"$m")
[ "$free" = 22 ] || fail "free GPUs: $free, not 22 of 32: $m"
grep -qE '^berth_gpus\{node="dgx-[0-3]",model="A100-80GB",state="allocated"\} 8$' <<<"$m" ||
  fail "no node shows the 8-GPU job: $m"
[ "$(metric "$m" 'berth_queue_usage_gpus{queue="default"}')" = 10 ] || fail "queue usage: $m"
[ "$(metric "$m" 'berth_scheduling_decisions_total{kind="start"}')" = 3 ] ||
  fail "start decisions: $m"
[ "$(metric "$m" 'berth_preemptions_total')" = 0 ] || fail "preemptions: $m"
cycles=$(metric "$m" 'berth_scheduling_cycle_duration_seconds_count')
[ "$cycles" -ge 1 ] || fail "no cycle timed: $m"
[ "$(metric "$m" 'berth_scheduling_cycle_duration_seconds_bucket{le="+Inf"}')" = "$cycles" ] ||
  fail "the +Inf bucket is not the count: $m"
[ "$(metric "$m" 'berth_api_request_duration_seconds_count{route="/v1/jobs",method="POST",code="201"}')" = 3 ] ||
  fail "submissions timed: $m"
[ "$(metric "$m" 'berth_api_request_duration_seconds_count{route="other",method="GET",code="404"}')" = 20 ] ||
  fail "unknown paths are not one series: $m"
[ "$(metric "$m" 'berth_api_request_duration_seconds_count{route="/v1/jobs/{id}/stop",method="POST",code="200"}')" = 1 ] ||
  fail "stop timed: $m"
[ "$(metric "$m" 'berth_api_request_duration_seconds_count{route="/v1/jobs/{id}",method="GET",code="404"}')" = 20 ] ||
  fail "unknown ids are not one series: $m"
! grep -q 'random-\|/v1/jobs/99\|BREW\|coffee' <<<"$m" || fail "a raw path or method is a label: $m"

# A real Prometheus scrapes the server every second; the series comes back through its API.
cat > "$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: berth
    static_configs:
      - targets: ['$BERTH_ADDR']
EOF
promtool check config "$TMP/prometheus.yml" > /dev/null || fail "the generated config is invalid"
for _ in $(seq 10); do
  port=$((20000 + RANDOM % 40000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue  # taken
  prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom" \
    --web.listen-address="127.0.0.1:$port" > "$TMP/prometheus.log" 2>&1 &
  PROM=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/-/ready" > /dev/null 2>&1 && break
    kill -0 "$PROM" 2>/dev/null || break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/-/ready" > /dev/null 2>&1 && break
  kill "$PROM" 2>/dev/null || true
  wait "$PROM" 2>/dev/null || true
  PROM=
done
[ -n "$PROM" ] || fail "Prometheus did not start: $(cat "$TMP/prometheus.log")"

# query EXPR: the first result's value, or "" while there is none.
query() {
  curl -s -G "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // empty'
}
got=
for _ in $(seq 300); do  # up to 30 s
  got=$(query 'berth_jobs{state="scheduled",job="berth"}')
  [ -n "$got" ] && break
  sleep 0.1
done
[ "$got" = 2 ] || fail "Prometheus read berth_jobs{state=\"scheduled\"} as '$got', not 2: \
$(query 'up'); $(tail -20 "$TMP/prometheus.log")"
got=$(query 'sum(berth_gpus{state="allocated"})')
[ "$got" = 10 ] || fail "Prometheus read the allocated GPUs as '$got', not 10"
[ "$(query 'up{job="berth"}')" = 1 ] || fail "Prometheus does not see the target up"

kill "$PROM"
wait "$PROM" 2>/dev/null || true
PROM=
echo "1 passed, 0 failed"
