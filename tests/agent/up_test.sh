# The README's path on one machine: `berth up` (server and local agent in one process, GPUs
# simulated here), then `berth run --gpus 2 IMAGE CMD` in the foreground and `berth logs`; a
# kill -9 of `berth up` and a restart keep every job.
source "$(dirname "$0")/../cli/lib.sh"
source "$SRC/tests/docker/dockerd.sh"
DK=$(mktemp -d /tmp/berth-up.XXXXXX)
UP= HTTPD=
stop_up() { [ -z "$UP" ] || { kill -9 "$UP" 2>/dev/null; wait "$UP" 2>/dev/null; } || true; }
trap 'stop_up; kill -9 $HTTPD 2>/dev/null || true; stop_dockerd; rm -rf "$TMP"' EXIT
start_dockerd "$DK"
build_test_image berth-test:1

# A DCGM exporter (busybox httpd serving a real capture, GPU 0's memory used set to 1234 MiB,
# which crowds no simulated GPU) and a host directory job volumes may mount from.
mkdir -p "$TMP/www" "$TMP/data"
sed 's/^\(DCGM_FI_DEV_FB_USED{gpu="0",.*\) 77303$/\1 1234/' tests/data/agent/dcgm/metrics.txt \
  > "$TMP/www/metrics"
grep -q '^DCGM_FI_DEV_FB_USED{gpu="0",.* 1234$' "$TMP/www/metrics" || fail "the capture was not edited"
serve_dir "$TMP/www"

# start_up [PORT]: berth up over $TMP/up; sets UP and BERTH_ADDR.
start_up() {
  : > "$TMP/up.log"
  "$BERTH" up --listen "127.0.0.1:${1:-0}" --state "$TMP/up" --docker-socket "$DOCKER_SOCK" \
    --allow-mount "$TMP/data" --dcgm-url "http://127.0.0.1:$HTTPD_PORT/metrics" --keep-failed 1 \
    >> "$TMP/up.log" 2>&1 &
  UP=$!
  wait_line "$TMP/up.log" "$UP" 'registered'
  BERTH_ADDR=$(sed -n 's|.*listening on http://\([^ ]*\) .*|\1|p' "$TMP/up.log")
  export BERTH_ADDR
}

start_up
grep -q 'next, in another terminal' "$TMP/up.log" || fail "berth up does not say what to do next: $(cat "$TMP/up.log")"
"$BERTH" nodes | grep -q 'ready (simulated GPUs)' || fail "the node is not shown simulated: $("$BERTH" nodes)"

out=$("$BERTH" run --gpus 2 berth-test:1 sh -c 'echo "gpus $CUDA_VISIBLE_DEVICES"') ||
  fail "berth run failed: $out"
grep -Eqx 'gpus GPU-sim-[^,]+-[0-9],GPU-sim-[^,]+-[0-9]' <<<"$out" || fail "two GPUs expected: $out"
[ "$("$BERTH" logs 1)" = "$out" ] || fail "berth logs 1 differs from what berth run printed"
# The agent reports the engine's images (with their layers) for the image-locality score.
for _ in $(seq 50); do
  [ "$("$BERTH" nodes --format json | jq '.nodes[0].images')" -ge 1 ] 2> /dev/null && break
  sleep 0.1
done
"$BERTH" nodes --format json | jq -e '.nodes[0].images >= 1 and .nodes[0].imageBytes > 0' > /dev/null ||
  fail "the node's images should be reported: $("$BERTH" nodes --format json)"
# Its cold start, phase by phase: queued (pending to placed), create, start, and the first line
# it printed (no pull: the image is here).
"$BERTH" inspect 1 |
  jq -e '.replicas[0].startSeconds | .queued >= 0 and .create >= 0 and .start >= 0 and
         .firstLog >= 0 and .firstLog < 30 and (has("pull") | not)' > /dev/null ||
  fail "inspect should time the container's start: $("$BERTH" inspect 1)"
expect_error "another berth server" "$BERTH" up --listen 127.0.0.1:0 --state "$TMP/up" \
  --docker-socket "$DOCKER_SOCK"

# --keep-failed 1: the container of the newest replica that failed stays for docker logs and
# docker inspect; one that succeeded, or an older failure, is removed.
containers_of() { _dk ps -aq --filter "label=berth.job=$1"; }
# until_true SECONDS COMMAND...: until COMMAND succeeds, or fails the test naming it.
until_true() {
  local tries=$(($1 * 10)); shift
  for _ in $(seq "$tries"); do "$@" && return 0; sleep 0.1; done
  fail "never true: $*"
}
ended() { [[ "$("$BERTH" inspect "$1" | jq -r .state)" =~ ^(succeeded|failed)$ ]]; }
gone() { [ -z "$(containers_of "$1")" ]; }
good=$("$BERTH" run -d --gpus 1 berth-test:1 true)
bad1=$("$BERTH" run -d --gpus 1 berth-test:1 sh -c 'echo first reason; exit 3')
until_true 30 ended "$good"
until_true 30 ended "$bad1"
until_true 30 gone "$good"
until_true 30 grep -q "keeping the container of job $bad1 replica 0, which failed (exit code 3)" "$TMP/up.log"
[ "$(_dk logs "$(containers_of "$bad1")")" = "first reason" ] ||
  fail "the failed job's container should be kept with its output: $(_dk ps -a)"
bad2=$("$BERTH" run -d --gpus 1 berth-test:1 sh -c 'echo second reason; exit 4')
until_true 30 ended "$bad2"
until_true 30 gone "$bad1"
[ "$(_dk logs "$(containers_of "$bad2")")" = "second reason" ] ||
  fail "the newest failed container should be kept: $(_dk ps -a)"
# A job stopped by berth did not fail by itself: its container goes.
stopped=$("$BERTH" run -d --gpus 1 berth-test:1 sleep 1000)
wait_state "$stopped" running
"$BERTH" stop "$stopped" > /dev/null
until_true 60 gone "$stopped"
[ -n "$(containers_of "$bad2")" ] || fail "the kept container should stay: $(_dk ps -a)"

# A long job survives a kill -9 of berth up; the restarted one adopts its container.
long=$("$BERTH" run -d --gpus 1 berth-test:1 sh -c 'echo begun; sleep 1000')
# Running, and its first line at the server (the agent holds a line back for a report or two),
# so that the restart below is tested with a line already kept.
begun() { "$BERTH" logs "$long" | grep -qx begun; }
for _ in $(seq 200); do
  [ "$("$BERTH" inspect "$long" | jq -r .state)" = running ] && begun && break
  sleep 0.1
done
begun || fail "job $long's first line did not reach the server: $("$BERTH" inspect "$long")"
container=$(_dk ps -q --filter "label=berth.job=$long")
[ -n "$container" ] || fail "job $long has no container"
jobs_before=$("$BERTH" ps -a -q | wc -l)
port=${BERTH_ADDR##*:}
stop_up
start_up "$port"
sleep 1
[ "$("$BERTH" inspect "$long" | jq -r .state)" = running ] || fail "job $long after restart: $("$BERTH" inspect "$long")"
[ "$(_dk ps -q --filter "label=berth.job=$long")" = "$container" ] || fail "job $long's container was replaced"
[ "$("$BERTH" ps -a -q | wc -l)" -eq "$jobs_before" ] ||
  fail "$jobs_before jobs expected after restart: $("$BERTH" ps -a)"
"$BERTH" stop "$long" > /dev/null
# The restarted agent keeps the failed container, and its output is not sent twice.
sleep 2
[ -n "$(containers_of "$bad2")" ] || fail "the kept container should outlive a restart: $(_dk ps -a)"
[ "$("$BERTH" logs "$bad2")" = "second reason" ] ||
  fail "a kept container's output should be kept once: $("$BERTH" logs "$bad2")"
[ "$("$BERTH" logs "$long" | grep -cx begun)" -eq 1 ] ||
  fail "the line written before the restart should be kept once: $("$BERTH" logs "$long")"

# Volumes from the directory berth up allows, and none from elsewhere.
echo "from the host" > "$TMP/data/hello"
out=$("$BERTH" run --gpus 1 -v "$TMP/data:/data:ro" berth-test:1 cat /data/hello) ||
  fail "a job mounting an allowed directory failed: $out"
[ "$out" = "from the host" ] || fail "the job should read the mounted file: $out"
expect_error "is not under a directory this server allows" "$BERTH" run -d -v /etc:/data \
  berth-test:1 true
# The GPUs' memory as the DCGM exporter reports it reaches the metrics.
node=$("$BERTH" nodes --format json | jq -r '.nodes[0].name')
dcgm_seen() { curl -sf "http://$BERTH_ADDR/metrics" | grep -qx "berth_gpu_memory_used_mib{node=\"$node\",gpu=\"0\"} 1234"; }
for _ in $(seq 100); do dcgm_seen && break; sleep 0.1; done
dcgm_seen || fail "GPU 0's memory from the DCGM exporter should be in the metrics: $(curl -sf "http://$BERTH_ADDR/metrics" | grep '^berth_gpu_')"


# Output past one report's 512 KiB, from a job that exits at once: every line arrives.
out=$("$BERTH" run --gpus 1 berth-test:1 sh -c \
  'i=0; while [ $i -lt 20000 ]; do echo "line $i ......................................................................"; i=$((i+1)); done; echo END')
[ "$(wc -l <<<"$out")" -eq 20001 ] && [ "$(tail -1 <<<"$out")" = END ] ||
  fail "a job's 1.6 MB of output should all arrive: $(wc -lc <<<"$out"), last: $(tail -1 <<<"$out")"
# Lines longer than the engine's 16 KiB pieces while another job fills most of each report:
# each arrives whole (a read cut short inside one lost the rest of it).
"$BERTH" run -d --gpus 1 berth-test:1 sh -c \
  'sleep 1; awk "BEGIN{for(i=1;i<=40000;i++) printf \"D %d %040d\n\", i, 0}"' > /dev/null
lengths=$("$BERTH" run --gpus 1 berth-test:1 sh -c \
  'sleep 1; awk "BEGIN{for(k=1;k<=10;k++){ s=\"\"; for(i=0;i<1000;i++) s=s sprintf(\"%099d \", k); print \"B\" k \" \" s }}"' |
  awk '{print length($0)}' | tr '\n' ' ')
[ "$lengths" = "100003 100003 100003 100003 100003 100003 100003 100003 100003 100004 " ] ||
  fail "ten lines of 100 KB should arrive whole, got lengths: $lengths"

# Output that takes more of a report's JSON than its bytes still arrives and the node stays
# healthy (reports over the server's request limit were refused, every one after): binary
# (escaped up to six times its size) and lines that switch stream at every line. The marker
# lines are long enough that the random bytes never hold one (a one-letter line did, 1 run in
# 20 or so).
rc=0
"$BERTH" run --gpus 1 berth-test:1 sh -c 'head -c 1000000 /dev/urandom; echo;
  awk "BEGIN{for(i=0;i<20000;i++){print \"out-line\"; fflush(); print \"err-line\" > \"/dev/stderr\"; fflush(\"/dev/stderr\")}}"' \
  > "$TMP/noisy.out" 2> "$TMP/noisy.err" || rc=$?
[ "$rc" -eq 0 ] || fail "the noisy job should succeed, got $rc: $(tail -3 "$TMP/noisy.err")"
# (A line or two may be missing: the engine stamps stdout and stderr apart, and one stamped
# before the agent's cursor that reaches the engine's log after it is not read; docs/agent.md.)
[ "$(grep -cx err-line "$TMP/noisy.err")" -ge 19995 ] &&
  [ "$(grep -cx out-line "$TMP/noisy.out")" -ge 19995 ] &&
  [ "$(grep -cx out-line "$TMP/noisy.out")" -le 20000 ] &&
  [ "$(grep -cx err-line "$TMP/noisy.err")" -le 20000 ] &&
  ! grep -qx err-line "$TMP/noisy.out" && ! grep -qx out-line "$TMP/noisy.err" ||
  fail "every line of the noisy job should arrive once, on its stream: $(grep -cx err-line "$TMP/noisy.err") on stderr, $(grep -cx out-line "$TMP/noisy.out") on stdout, $(grep -cx err-line "$TMP/noisy.out") err-lines on stdout, $(grep -cx out-line "$TMP/noisy.err") out-lines on stderr"
"$BERTH" nodes | grep -q unhealthy && fail "the node should stay healthy: $("$BERTH" nodes)"

# A job's large output reaches berth run soon after the job exits (the agent read an exited
# container's log 512 KiB a heartbeat, each read making the engine scan the log from its start:
# 24 MiB took 98 s while the job held its GPU; now about 8 s here), every line once.
timeout 60 "$BERTH" run --gpus 1 berth-test:1 sh -c \
  'awk "BEGIN{for(i=0;i<251658;i++) printf \"%099d\n\", i}"' > "$TMP/large.out" ||
  fail "a job printing 24 MiB should end within a minute, with all of it"
[ "$(wc -l < "$TMP/large.out")" -eq 251658 ] && [ "$(sort -u "$TMP/large.out" | wc -l)" -eq 251658 ] ||
  fail "every line of the large output should arrive once: $(wc -l < "$TMP/large.out") lines"

# berth bench run: containers through berth against the engine alone, on this engine.
bench=$("$BERTH" bench run --image berth-test:1 --docker-socket "$DOCKER_SOCK" --repeat 1 --jobs 12 \
  --json) || fail "bench run failed: $bench"
jq -e '.submit_to_running.berth_s > 0 and .submit_to_running.docker_s > 0 and
       .exit_to_done.berth_s >= 0 and .exit_to_done.berth_s < 30 and .exit_to_done.docker_s >= 0 and
       .batch.berth_s > 0 and .batch.docker_s > 0 and .batch_jobs == 12 and .batch_parallel >= 1' \
  <<<"$bench" > /dev/null || fail "bench run's figures are not plausible: $bench"
# None of the bench's jobs was taken for lost (a report saying the agent had acted on their
# assignments while their containers were still being started).
lost=$("$BERTH" events --format json | jq -c 'select(.state == "lost")')
[ -z "$lost" ] || fail "no job should be lost: $lost"
expect_error "--image nope:1: not on the Docker engine" "$BERTH" bench run --image nope:1 \
  --docker-socket "$DOCKER_SOCK"
# SIGTERM stops berth up without waiting out its agent's watch of the assignments (a 25 s long
# poll; the server's idle keep-alive connections may still take their 5 s).
began=$(date +%s)
kill -TERM "$UP"
wait "$UP" || fail "berth up should exit 0 on SIGTERM"
UP=
[ $(($(date +%s) - began)) -lt 20 ] || fail "berth up took $(($(date +%s) - began)) s to stop"
echo "up: ok"
