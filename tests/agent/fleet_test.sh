# A fleet on one machine: a berth server and three node agents (n0, n1, n2, GPUs declared in
# tests/agent/data/fleet.yaml) on one private Docker engine, each agent managing only its own
# containers. Through berth: exit codes, logs, GPU ids and CPU sets; preemption within the
# grace period; kill -9 of an agent and of the server; a lost node; dockerd stopped and started;
# images pulled ahead for a job waiting to land; a container removed while its agent is down;
# a paused agent replaced by another process, on the same engine and on a second one; volumes,
# and a symbolic link out of an allowed directory.
source "$(dirname "$0")/../cli/lib.sh"
source "$SRC/tests/docker/dockerd.sh"
DK=$(mktemp -d /tmp/berth-fleet.XXXXXX)
declare -A AGENT=()
# (Under set -e, which the exit trap runs with too, every step must succeed.)
stop_agents() {
  local p
  for p in "${AGENT[@]}"; do
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
DK2=$(mktemp -d /tmp/berth-fleet2.XXXXXX)
# Runs a command against a second private engine (another host's, in part 11).
second_engine() {
  local DOCKERD_DIR=$DK2 DOCKER_SOCK=$DK2/docker.sock
  "$@"
}
trap 'stop_agents; stop_server; stop_dockerd; second_engine stop_dockerd; rm -rf "$TMP"' EXIT
start_dockerd "$DK"
build_test_image berth-test:1
FLEET=tests/agent/data/fleet.yaml

start_agent() {
  "$BERTH" agent --server "http://$BERTH_ADDR" --node "$1" --declare "$FLEET" \
    --docker-socket "$DOCKER_SOCK" --heartbeat 0.2 >> "$TMP/agent-$1.log" 2>&1 &
  AGENT[$1]=$!
}
# wait_for SECONDS DESCRIPTION COMMAND...: until the command succeeds.
wait_for() {
  local tries=$(( $1 * 10 )) what=$2; shift 2
  for _ in $(seq "$tries"); do "$@" > /dev/null 2>&1 && return 0; sleep 0.1; done
  fail "$what did not happen in time"
}
agents_are() { [ "$("$BERTH" nodes --format json | jq -r "[.nodes[].agent] | join(\",\")")" = "$1" ]; }
node_agent_is() {
  [ "$("$BERTH" nodes --format json | jq -r ".nodes[] | select(.name==\"$1\") | .agent")" = "$2" ]
}
state_is() { [ "$("$BERTH" inspect "$1" | jq -r .state)" = "$2" ]; }
containers() { _dk ps -aq --filter "label=$1" | wc -l; }
no_containers() { [ "$(containers "$1")" -eq 0 ]; }
# The job's one container's id (fails unless exactly one).
container_of() {
  local ids; ids=$(_dk ps -aq --filter "label=berth.job=$1")
  [ "$(wc -w <<<"$ids")" -eq 1 ] || fail "job $1 has containers: '$ids'"
  echo "$ids"
}
# The last line of a test trap.
TRAPPER='trap "echo got-term; exit 0" TERM; echo started; while true; do sleep 0.2; done'

export CLUSTER=$FLEET
start_server --node-unhealthy-after 2 --node-lost-after 4
for n in n0 n1 n2; do start_agent $n; done
wait_for 10 "three agents registering" agents_are ready,ready,ready
"$BERTH" nodes | grep -q 'ready (simulated GPUs)' || fail "nodes do not say simulated: $("$BERTH" nodes)"

echo "fleet: part 1" >&2
# 1. A 2-GPU job: exactly its two GPUs, the CPUs of their socket, its exit code and logs.
rc=0
out=$("$BERTH" run --gpus 2 berth-test:1 sh -c \
  'echo gpus=$NVIDIA_VISIBLE_DEVICES; echo cpus=$(cat /sys/fs/cgroup/cpuset/cpuset.cpus); echo oops >&2; exit 3' \
  2> "$TMP/run1.err") || rc=$?
[ "$rc" -eq 3 ] || fail "berth run should exit 3 as its job did, got $rc: $out"
gpus=$(sed -n 's/^gpus=//p' <<<"$out")
node=$(sed -n 's/^GPU-sim-\(n[0-9]\)-.*/\1/p' <<<"$gpus")
case "$gpus" in
  "GPU-sim-$node-0,GPU-sim-$node-1") cpus=0 ;;
  "GPU-sim-$node-2,GPU-sim-$node-3") cpus=1 ;;
  *) fail "the container should see two GPUs of one socket, saw '$gpus'" ;;
esac
grep -qx "cpus=$cpus" <<<"$out" || fail "GPUs $gpus sit on CPU $cpus's socket; the container had: $out"
# The job's stderr comes out on stderr, as docker's does, in `berth run` and in `berth logs`.
grep -qx oops "$TMP/run1.err" || fail "berth run should print the job's stderr on stderr: $(cat "$TMP/run1.err")"
! grep -q oops <<<"$out" || fail "berth run printed the job's stderr on stdout: $out"
"$BERTH" logs 1 2>&1 > /dev/null | grep -qx oops || fail "berth logs 1 lacks stderr: $("$BERTH" logs 1 2>&1)"
! "$BERTH" logs 1 2> /dev/null | grep -q oops || fail "berth logs 1 printed stderr on stdout"
# --format json: a line of output an object, on stdout, with its stream.
[ "$("$BERTH" logs --format json 1 2> /dev/null | jq -r 'select(.stream == "stderr") | .text')" = oops ] ||
  fail "berth logs --format json 1: $("$BERTH" logs --format json 1)"
[ "$("$BERTH" logs --format json 1 | jq -j 'select(.stream == "stdout") | .text')" = "$out" ] ||
  fail "berth logs --format json 1's stdout lines differ from berth run's: $("$BERTH" logs --format json 1)"
[ "$("$BERTH" logs 1 2> /dev/null)" = "$out" ] || fail "berth logs 1's stdout differs from berth run's: $("$BERTH" logs 1)"
[ "$("$BERTH" inspect 1 | jq -r '.state,.exitCode' | tr '\n' ' ')" = "failed 3 " ] ||
  fail "job 1 should have failed with 3: $("$BERTH" inspect 1)"
wait_for 15 "job 1's container removed once it ended" no_containers berth.job=1
out=$("$BERTH" run --gpus 1 berth-test:1 echo fine) || fail "a job exiting 0 should exit 0: $out"
[ "$out" = fine ] || fail "berth run printed '$out'"
# A gang whose replica fails fails with its code, but `berth run` ends only once the other
# replica has stopped, with its last words (its GPUs are held until then): job 3.
rc=0
out=$("$BERTH" run --replicas 2 --gpus 4 berth-test:1 sh -c \
  'if [ "$BERTH_REPLICA" = 0 ]; then sleep 3; exit 3; fi; trap "sleep 0.5; echo last-words; exit 0" TERM; while true; do sleep 0.2; done' \
  2> "$TMP/run3.err") || rc=$?
[ "$rc" -eq 3 ] || fail "berth run of a gang whose replica exited 3 should exit 3, got $rc: $out"
[ "$out" = last-words ] || fail "berth run should print the other replica's last words, printed '$out'"
[ "$("$BERTH" inspect 3 | jq -r '.state,.exitCode,has("stopping")' | tr '\n' ' ')" = "failed 3 false " ] ||
  fail "job 3 should have failed with 3, its containers stopped: $("$BERTH" inspect 3)"
# A line longer than a report (512 KiB) comes in pieces, each ended by a newline, none lost, and
# the next line does not run on from it (review: 16 KiB of it were kept, glued to the next
# line): job 4.
"$BERTH" run --gpus 1 berth-test:1 sh -c "echo s1; head -c 600000 /dev/zero | tr '\\0' y; echo ' END'; echo s2" > /dev/null
"$BERTH" logs 4 > "$TMP/long.out"
[ "$(head -1 "$TMP/long.out")" = s1 ] && [ "$(tail -1 "$TMP/long.out")" = s2 ] &&
  [ "$(sed '1d;$d' "$TMP/long.out" | tr -d '\n' | tr -d y)" = " END" ] &&
  [ "$(tr -cd y < "$TMP/long.out" | wc -c)" -eq 600000 ] ||
  fail "a 600 KB line should come whole in pieces between its neighbours: $(awk '{ print length($0) }' "$TMP/long.out" | tr '\n' ' ')"

echo "fleet: part 2" >&2
# 2. One 4-GPU job a node: each agent runs only its own node's container.
low=()
for _ in 1 2 3; do low+=("$("$BERTH" run -d --gpus 4 --priority 0 berth-test:1 sh -c "$TRAPPER")"); done
for j in "${low[@]}"; do wait_for 15 "job $j running" state_is "$j" running; done
for n in n0 n1 n2; do
  [ "$(containers "berth.node=$n")" -eq 1 ] || fail "node $n should run one container: $(_dk ps -a)"
done
[ "$(_dk ps -q | wc -l)" -eq 3 ] || fail "three containers should run: $(_dk ps -a)"
# Named after the run (a create tried again meets the first container, not a second one).
c=$(container_of "${low[0]}")
cnode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$c")
[[ "$(_dk inspect -f '{{.Name}}' "$c")" =~ ^/berth-$cnode-j${low[0]}-r0-p[0-9]+$ ]] ||
  fail "job ${low[0]}'s container is named $(_dk inspect -f '{{.Name}}' "$c")"
# A CPU set changed under the agent is put back to the assignment's (both sockets: CPUs 0 and 1).
cpus_of() { _dk inspect -f '{{.HostConfig.CpusetCpus}}' "$c"; }
[[ "$(cpus_of)" =~ ^(0-1|0,1)$ ]] || fail "a 4-GPU job should have both sockets' CPUs, has $(cpus_of)"
_dk update --cpuset-cpus 1 "$c" > /dev/null
back_to_both() { [[ "$(cpus_of)" =~ ^(0-1|0,1)$ ]]; }
wait_for 5 "the agent rebinding job ${low[0]}'s container to CPUs 0-1" back_to_both
# The agent logs the move after the engine made it: wait for the line too.
said_rebound() { grep -qE "CPUs 1, NUMA nodes [0-9,-]+ -> CPUs 0-1" "$TMP/agent-$cnode.log"; }
wait_for 5 "the agent saying it rebound job ${low[0]}'s container" said_rebound

echo "fleet: part 3" >&2
# 3. Preemption: a job of higher priority takes a node; its victim gets SIGTERM and stops within
#    its grace period, goes back to pending, and the preemptor runs there.
high=$("$BERTH" run -d --gpus 4 --priority 10 berth-test:1 sh -c "$TRAPPER")
wait_for 20 "the preemptor running" state_is "$high" running
victim=""
for j in "${low[@]}"; do state_is "$j" pending && victim=$j; done
[ -n "$victim" ] || fail "no job went back to pending: $("$BERTH" ps -a)"
"$BERTH" inspect "$victim" | jq -r '.events[].state' | grep -qx preempted ||
  fail "the victim's events lack preempted: $("$BERTH" inspect "$victim")"
"$BERTH" logs "$victim" | grep -qx got-term || fail "the victim never got SIGTERM: $("$BERTH" logs "$victim")"
[ "$(_dk ps -q | wc -l)" -eq 3 ] || fail "after preemption three containers should run: $(_dk ps -a)"

echo "fleet: part 4" >&2
# 4. kill -9 an agent whose job runs, and start it again: the container is adopted, not
#    started twice.
running=${low[0]}; [ "$running" != "$victim" ] || running=${low[1]}
before=$(container_of "$running")
anode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$before")
kill -9 "${AGENT[$anode]}"; wait "${AGENT[$anode]}" 2>/dev/null || true
start_agent "$anode"
sleep 1.5
state_is "$running" running || fail "job $running should still run: $("$BERTH" inspect "$running")"
[ "$(container_of "$running")" = "$before" ] || fail "job $running's container was replaced"

echo "fleet: part 5" >&2
# 5. kill -9 the server and start it again: every job as it was, nothing started twice.
stop_server
ps_before=$(_dk ps -q | sort)
start_server --listen "$BERTH_ADDR" --node-unhealthy-after 2 --node-lost-after 4
wait_for 15 "agents reconnecting" agents_are ready,ready,ready
sleep 1
for j in "$running" "$high"; do state_is "$j" running || fail "job $j after the restart: $("$BERTH" inspect "$j")"; done
[ "$(_dk ps -q | sort)" = "$ps_before" ] || fail "containers changed across the server's restart"
"$BERTH" stop "$high" > /dev/null
wait_for 10 "the stopped job's container gone" no_containers "berth.job=$high"

echo "fleet: part 6" >&2
# 6. A node whose agent is gone: unhealthy, then lost; its job is placed again elsewhere, and
#    the agent, back, stops the container it was running.
wait_for 15 "the victim running again" state_is "$victim" running
lost=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$(container_of "$running")")
orphan=$(container_of "$running")
kill -9 "${AGENT[$lost]}"; wait "${AGENT[$lost]}" 2>/dev/null || true
wait_for 10 "node $lost lost" node_agent_is "$lost" lost
state_is "$running" running && fail "job $running should have left the lost node $lost"
"$BERTH" inspect "$running" | jq -r '.events[].state' | grep -qx lost ||
  fail "job $running's events lack lost: $("$BERTH" inspect "$running")"
start_agent "$lost"
wait_for 10 "the returning agent stopping the lost job's old container" \
  bash -c "! docker -H unix://$DOCKER_SOCK ps -q --no-trunc | grep -q $orphan"
wait_for 15 "job $running running again" state_is "$running" running
[ "$(_dk ps -q --filter "label=berth.job=$running" | wc -l)" -eq 1 ] ||
  fail "job $running runs more than once: $(_dk ps -a)"

echo "fleet: part 6b" >&2
# 6b. An agent the server refuses for now (409: it finds 3 GPUs where the cluster file declares
#     4) keeps the node's container while its job is placed there; once the node is lost and the
#     job runs elsewhere, the refusal says so and the agent stops the old container: the job
#     runs once (review: it ran on beside the new one for ever).
held=$("$BERTH" run -d --gpus 1 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $held running" state_is "$held" running
old=$(container_of "$held")
rnode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$old")
sed '/cpus: "1"/s/switches: \[2\]/switches: [1]/' "$FLEET" > "$TMP/fewer.yaml"
kill -9 "${AGENT[$rnode]}"; wait "${AGENT[$rnode]}" 2>/dev/null || true
"$BERTH" agent --server "http://$BERTH_ADDR" --node "$rnode" --declare "$TMP/fewer.yaml" \
  --docker-socket "$DOCKER_SOCK" --heartbeat 0.2 > "$TMP/refused.log" 2>&1 &
AGENT[$rnode]=$!
wait_line "$TMP/refused.log" "${AGENT[$rnode]}" "the cluster file declares 4"
[ "$(_dk inspect -f '{{.State.Running}}' "$old")" = true ] ||
  fail "job $held's container was stopped while its job is placed there: $(cat "$TMP/refused.log")"
wait_for 10 "node $rnode lost" node_agent_is "$rnode" lost
wait_for 20 "the refused agent stopping job $held's old container" \
  eval "[ \"\$(_dk inspect -f '{{.State.Running}}' $old)\" = false ]"
grep -q "the server no longer places job $held here" "$TMP/refused.log" ||
  fail "the refused agent did not say why it stopped the container: $(cat "$TMP/refused.log")"
wait_for 20 "job $held running elsewhere" state_is "$held" running
[ "$(_dk ps -q --filter "label=berth.job=$held" | wc -l)" -eq 1 ] ||
  fail "job $held runs more than once: $(_dk ps -a)"
kill -0 "${AGENT[$rnode]}" || fail "the refused agent should keep asking: $(cat "$TMP/refused.log")"
kill -9 "${AGENT[$rnode]}"; wait "${AGENT[$rnode]}" 2>/dev/null || true
start_agent "$rnode"
wait_for 15 "node $rnode back" node_agent_is "$rnode" ready
"$BERTH" stop "$held" > /dev/null
wait_for 15 "job $held's containers gone" no_containers "berth.job=$held"

echo "fleet: part 7" >&2
# 7. dockerd stopped under running agents, then started again: the agents carry on.
#    Meanwhile each node says its agent cannot reach the engine.
engines_away() { "$BERTH" nodes --format json | jq -e '[.nodes[].engineError] | map(length > 0) | all' > /dev/null; }
engines_back() { "$BERTH" nodes --format json | jq -e '[.nodes[].engineError] | map(length == 0) | all' > /dev/null; }
# One job ignores SIGTERM, so the engine's shutdown takes its stop timeout: the exits it makes
# are seen only once it is back (review: they were taken for the jobs' own, which ended
# succeeded, and the deaf one failed with 137).
"$BERTH" stop "$running" > /dev/null
wait_for 15 "job $running's container gone" no_containers "berth.job=$running"
cat > "$TMP/deaf.yaml" <<'YAML'
gpus: 3
gracePeriodSeconds: 2
image: berth-test:1
command: [sh, -c, 'trap "" TERM; echo up; while true; do sleep 0.2; done']
YAML
deaf=$("$BERTH" run -d -f "$TMP/deaf.yaml")
wait_for 15 "job $deaf running" state_is "$deaf" running
was_running=()
for j in $("$BERTH" ps -q); do state_is "$j" running && was_running+=("$j"); done
[ ${#was_running[@]} -ge 3 ] || fail "three jobs should run before dockerd stops: $("$BERTH" ps)"
_kill_pidfile "$DOCKERD_DIR/dockerd.pid" dockerd
wait_for 30 "the agents saying the engine is away" engines_away
nodes_text=$("$BERTH" nodes)
grep -q "(no container engine)" <<<"$nodes_text" || fail "berth nodes: $nodes_text"
launch_dockerd
wait_for 30 "dockerd back" _dk version
wait_for 30 "the agents reaching the engine again" engines_back
for n in n0 n1 n2; do kill -0 "${AGENT[$n]}" || fail "agent $n died with dockerd: $(cat "$TMP/agent-$n.log")"; done
out=$("$BERTH" run --gpus 1 --priority 20 berth-test:1 echo back) || fail "a job after dockerd's restart: $out"
[ "$out" = back ] || fail "after dockerd's restart berth run printed '$out'"
# The engine stopped the running jobs' containers as it stopped (their traps exit 0 on SIGTERM):
# that says nothing of the jobs, which run again rather than end.
for j in "${was_running[@]}"; do
  wait_for 30 "job $j running again after the engine's restart" state_is "$j" running
  states=$("$BERTH" inspect "$j" | jq -r '.events[].state')
  ! grep -qxE 'succeeded|failed' <<<"$states" || fail "job $j ended when its engine stopped: $states"
  "$BERTH" inspect "$j" | jq -r '.events[] | select(.state == "lost") | .reason' |
    grep -q "stopped by the node's container engine, not by berth" ||
    fail "job $j's events should say its engine stopped it: $("$BERTH" inspect "$j")"
done

for j in $("$BERTH" ps -q); do "$BERTH" stop "$j" > /dev/null; done
wait_for 15 "every container stopped" eval '[ -z "$(_dk ps -q)" ]'

echo "fleet: part 8" >&2
# 8. A job's container removed while its agent is down: the agent, back, does not make it again
#    under the same placement (unseen, as if it had never run) but reports it gone: the job is
#    lost, placed again after its back-off, and runs once.
gone=$("$BERTH" run -d --gpus 4 berth-test:1 sh -c 'echo up; sleep 1000')
wait_for 15 "job $gone running" state_is "$gone" running
first=$(container_of "$gone")
gnode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$first")
kill -9 "${AGENT[$gnode]}"; wait "${AGENT[$gnode]}" 2>/dev/null || true
_dk rm -f "$first" > /dev/null
start_agent "$gnode"
lost_as_gone() {
  "$BERTH" inspect "$1" |
    jq -e '[.events[] | select(.state == "lost") | .reason] | any(test("is gone"))'
}
wait_for 10 "job $gone lost with its container" lost_as_gone "$gone"
wait_for 40 "job $gone running again (after its back-off)" state_is "$gone" running
[ "$(_dk ps -q --filter "label=berth.job=$gone" | wc -l)" -eq 1 ] ||
  fail "job $gone should run once: $(_dk ps --filter "label=berth.job=$gone")"
"$BERTH" stop "$gone" > /dev/null
wait_for 40 "job $gone's container stopped (its shell ignores SIGTERM: after the grace period)" \
  eval '[ -z "$(_dk ps -q)" ]'

echo "fleet: part 8b" >&2
# 8b. The same while its agent runs: the agent started that run, so it does not make it again
#     either (review: it did at once, and the job ran three times, once unseen).
again=$("$BERTH" run -d --gpus 4 berth-test:1 sh -c 'echo up; sleep 1000')
wait_for 15 "job $again running" state_is "$again" running
wait_for 10 "job $again's first line" eval '"$BERTH" logs "$again" | grep -q up'
_dk rm -f "$(container_of "$again")" > /dev/null
wait_for 10 "job $again lost with its container" lost_as_gone "$again"
wait_for 40 "job $again running again (after its back-off)" state_is "$again" running
wait_for 10 "job $again's second run's first line" \
  eval '[ "$("$BERTH" logs "$again" | grep -c up)" -ge 2 ]'
sleep 1
[ "$("$BERTH" logs "$again" | grep -c up)" -eq 2 ] ||
  fail "job $again should have run twice (once placed again): $("$BERTH" logs "$again")"
"$BERTH" stop "$again" > /dev/null

# 8c. A container with berth's labels that berth did not make, its job id one no server gives:
#     left alone, and the node's reports are still taken (review: each was refused, the node
#     was lost, and its job ran a second time elsewhere).
_dk run -d --name not-berths --label berth.node=n0 --label berth.job=-5 \
  --label berth.replica=0 --label berth.placement=p1 berth-test:1 sleep 1000 > /dev/null
sleep 3  # past --node-unhealthy-after
node_agent_is n0 ready || fail "n0 is not ready: $("$BERTH" nodes); $(tail -3 "$TMP/agent-n0.log")"
[ "$(_dk inspect -f '{{.State.Running}}' not-berths)" = true ] || fail "the agent stopped a container not its own"
_dk rm -f not-berths > /dev/null
wait_for 40 "job $again's container stopped" eval '[ -z "$(_dk ps -q)" ]'

echo "fleet: part 8d" >&2
# 8d. A docker stop by hand while the job's agent is down (kill -9): the agent, back, finds the
#     engine's kill among the events it missed, so the job runs again rather than ending
#     "succeeded" because its trap exits 0 (before, a restarted agent read events from now on).
byhand=$("$BERTH" run -d --gpus 4 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $byhand running" state_is "$byhand" running
wait_for 10 "job $byhand's first line" eval '"$BERTH" logs "$byhand" | grep -q started'
first=$(container_of "$byhand")
hnode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$first")
kill -9 "${AGENT[$hnode]}"; wait "${AGENT[$hnode]}" 2>/dev/null || true
_dk stop -t 5 "$first" > /dev/null
start_agent "$hnode"
wait_for 40 "job $byhand running a second time" \
  eval '[ "$("$BERTH" logs "$byhand" | grep -c started)" -ge 2 ]'
states=$("$BERTH" inspect "$byhand" | jq -r '.events[].state')
! grep -qxE 'succeeded|failed' <<<"$states" || fail "job $byhand ended when stopped by hand: $states"
! "$BERTH" inspect "$byhand" | jq -r '.events[].reason' | grep -q "node $hnode was lost" ||
  fail "node $hnode was lost while its agent restarted (too slow): $("$BERTH" inspect "$byhand")"
"$BERTH" inspect "$byhand" | jq -r '.events[] | select(.state == "lost") | .reason' |
  grep -q "a docker stop by hand" ||
  fail "job $byhand's events should say its engine stopped it: $("$BERTH" inspect "$byhand")"
"$BERTH" stop "$byhand" > /dev/null
wait_for 15 "job $byhand's container stopped" eval '[ -z "$(_dk ps -q)" ]'

echo "fleet: part 9" >&2
# 9. A preemptor waits out its victim's grace period: the node it will land on, and only that
#    one, pulls its image meanwhile (from a registry that is not there: tried, and failing).
cat > "$TMP/term-deaf.yaml" <<'YAML'
gpus: 4
gracePeriodSeconds: 8
image: berth-test:1
command: [sh, -c, 'trap "" TERM; echo started; while true; do sleep 0.2; done']
YAML
for _ in 1 2 3; do "$BERTH" run -d -f "$TMP/term-deaf.yaml" > /dev/null; done
wait_for 15 "three jobs that ignore SIGTERM running" eval '[ "$(_dk ps -q | wc -l)" -eq 3 ]'
far=127.0.0.1:9/berth-absent:1
pre=$("$BERTH" run -d --gpus 4 --priority 1000 "$far" true)  # above the default, 100
prefetching() { [ "$(grep -l "prefetching $far" "$TMP"/agent-n*.log | wc -l)" -eq 1 ]; }
wait_for 5 "the preemptor's node prefetching its image" prefetching
state_is "$pre" pending || fail "the preemptor should wait for its victim: $("$BERTH" inspect "$pre")"
wait_for 5 "the prefetch failing" grep -q "cannot prefetch $far" "$TMP"/agent-n*.log
# A victim stopped during its grace period stays stopped (review: it ran again once its grace
# period ended).
for j in $("$BERTH" ps -q); do "$BERTH" stop "$j" > /dev/null; done
for _ in $(seq 200); do [ -z "$(_dk ps -q)" ] && break; sleep 0.1; done
[ -z "$(_dk ps -q)" ] || fail "containers run on: $(_dk ps -a; "$BERTH" ps -a; for j in $("$BERTH" ps -q); do "$BERTH" inspect $j | jq -c .events; done)"

# An agent process: ended (a zombie until waited for counts as ended).
ended() { ! kill -0 "$1" 2> /dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null)" = Z ]; }
registrations() { grep -c "registered with" "$TMP/agent-$1.log" || true; }
# replace_paused NODE [second_engine]: pauses NODE's agent past three report periods (0.2 s
# each), starts another under its name (on the second engine when asked) and, once that one has
# registered, wakes the first. Sets OLD to the first one's pid.
replace_paused() {
  local node=$1 before; shift
  OLD=${AGENT[$node]}
  before=$(registrations "$node")
  kill -STOP "$OLD"
  sleep 1
  "$@" start_agent "$node"
  wait_for 10 "a second agent registering as $node" eval "[ \$(registrations $node) -gt $before ]"
  kill -CONT "$OLD"
  wait_for 10 "the replaced agent of $node ending" ended "$OLD"
  local rc=0
  wait "$OLD" || rc=$?
  [ "$rc" -eq 1 ] || fail "a replaced agent should exit 1, exited $rc: $(tail "$TMP/agent-$node.log")"
}

echo "fleet: part 10" >&2
# 10. An agent paused past three report periods while another process registers under its node
#     name on the same engine: the new one adopts the node's container; the old one, woken, is
#     told it was replaced and ends without touching it. The job runs once throughout.
shared=$("$BERTH" run -d --gpus 4 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $shared running" state_is "$shared" running
c=$(container_of "$shared")
snode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$c")
replace_paused "$snode"
grep -q "this one stops" "$TMP/agent-$snode.log" || fail "the replaced agent did not say why: $(tail "$TMP/agent-$snode.log")"
grep -q "runs on this Docker engine and keeps the node's containers" "$TMP/agent-$snode.log" ||
  fail "the replaced agent should leave the containers to the new one: $(tail "$TMP/agent-$snode.log")"
sleep 1
[ "$(container_of "$shared")" = "$c" ] || fail "job $shared's container was replaced"
[ "$(_dk inspect -f '{{.State.Running}}' "$c")" = true ] || fail "job $shared's container was stopped"
state_is "$shared" running || fail "job $shared should run on: $("$BERTH" inspect "$shared")"
[ "$("$BERTH" logs "$shared" | grep -c started)" -eq 1 ] || fail "job $shared started more than once"
"$BERTH" stop "$shared" > /dev/null
wait_for 10 "job $shared's container gone (stopped by the new agent)" no_containers "berth.job=$shared"

echo "fleet: part 11" >&2
# 11. The same with the new agent on another engine (the node's name moved to another host):
#     the old one, woken, stops and removes the node's container on its own engine, so the job
#     does not run twice; the job, gone from the node's new engine, is lost and runs once again.
second_engine start_dockerd "$DK2"
second_engine build_test_image berth-test:1
moved=$("$BERTH" run -d --gpus 4 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $moved running" state_is "$moved" running
mnode=$(_dk inspect -f '{{index .Config.Labels "berth.node"}}' "$(container_of "$moved")")
replace_paused "$mnode" second_engine
grep -q "runs on another Docker engine: stopping the 1 containers of node $mnode" "$TMP/agent-$mnode.log" ||
  fail "the replaced agent should stop its container: $(tail "$TMP/agent-$mnode.log")"
no_containers "berth.node=$mnode" || fail "node $mnode's old engine still has: $(_dk ps -a)"
wait_for 10 "job $moved lost with its container" lost_as_gone "$moved"
wait_for 40 "job $moved running again (after its back-off)" state_is "$moved" running
# Running containers of job $1 over both engines.
runs_of() {
  echo $(( $(_dk ps -q --filter "label=berth.job=$1" | wc -l) +
    $(second_engine _dk ps -q --filter "label=berth.job=$1" | wc -l) ))
}
[ "$(runs_of "$moved")" -eq 1 ] || fail "job $moved should run once over both engines: $(runs_of "$moved")"

echo "fleet: part 12" >&2
# 12. The refusal a paused agent wakes to may be stale: the process it names was itself
#     replaced since, by one on the other engine. The woken agent asks the server who holds the
#     node now and removes its containers (review: it kept them, and the job ran twice).
stale=$("$BERTH" run -d --gpus 4 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $stale running" state_is "$stale" running
here=""; there=second_engine  # the engine the job runs on, and the other one
[ "$(containers "berth.job=$stale")" -eq 1 ] || { here=second_engine; there=""; }
tnode=$($here _dk inspect -f '{{index .Config.Labels "berth.node"}}' \
  "$($here _dk ps -q --filter "label=berth.job=$stale")")
OLD=${AGENT[$tnode]}
before=$(registrations "$tnode")
kill -STOP "$OLD"
sleep 1
$here start_agent "$tnode"  # on the same engine: it adopts the container, then goes
wait_for 10 "a second agent registering as $tnode" eval "[ \$(registrations $tnode) -gt $before ]"
kill -TERM "${AGENT[$tnode]}"; wait "${AGENT[$tnode]}" || true
sleep 1
before=$(registrations "$tnode")
$there start_agent "$tnode"
wait_for 10 "a third agent registering as $tnode" eval "[ \$(registrations $tnode) -gt $before ]"
kill -CONT "$OLD"
wait_for 15 "the first agent of $tnode ending" ended "$OLD"
wait "$OLD" || true
[ "$($here containers "berth.node=$tnode")" -eq 0 ] ||
  fail "the first agent left its containers: $(tail "$TMP/agent-$tnode.log")"
# Still "running" until the new agent's report says the container is gone from its engine.
wait_for 10 "job $stale lost with its container" lost_as_gone "$stale"
wait_for 40 "job $stale running again" state_is "$stale" running
[ "$(runs_of "$stale")" -eq 1 ] || fail "job $stale should run once over both engines: $(runs_of "$stale")"

echo "fleet: part 12b" >&2
# 12b. The node moved to the other engine while its agent here was down (kill -9), its
#      container left here. The agent started here again is refused (another agent holds the
#      node) and, since that one runs on another engine, removes the node's containers here: the
#      job runs once (review: it ran here and on the other engine for as long as that agent
#      lived).
left=$("$BERTH" run -d --gpus 1 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $left running" state_is "$left" running
here=""; there=second_engine
[ "$(containers "berth.job=$left")" -eq 1 ] || { here=second_engine; there=""; }
lnode=$($here _dk inspect -f '{{index .Config.Labels "berth.node"}}' \
  "$($here _dk ps -q --filter "label=berth.job=$left")")
kill -9 "${AGENT[$lnode]}"; wait "${AGENT[$lnode]}" 2>/dev/null || true
before=$(registrations "$lnode")
$there start_agent "$lnode"  # the job's container is not on that engine
wait_for 10 "an agent registering as $lnode on the other engine" \
  eval "[ \$(registrations $lnode) -gt $before ]"
start_refused() {
  "$BERTH" agent --server "http://$BERTH_ADDR" --node "$1" --declare "$FLEET" \
    --docker-socket "$DOCKER_SOCK" --heartbeat 0.2 > "$TMP/refused-here.log" 2>&1 &
  REFUSED=$!
}
$here start_refused "$lnode"
wait_for 15 "the agent started here again removing node $lnode's containers" \
  eval "[ \$($here containers berth.node=$lnode) -eq 0 ]"
grep -q "is held by an agent on another Docker engine" "$TMP/refused-here.log" ||
  fail "the refused agent did not say why it removed them: $(cat "$TMP/refused-here.log")"
kill -9 "$REFUSED"; wait "$REFUSED" 2>/dev/null || true
wait_for 10 "job $left lost with its container" lost_as_gone "$left"
wait_for 40 "job $left running again" state_is "$left" running
[ "$(runs_of "$left")" -eq 1 ] || fail "job $left should run once over both engines: $(runs_of "$left")"
"$BERTH" stop "$left" > /dev/null

echo "fleet: part 13" >&2
# 13. Volumes: a job writes to a host directory under one the server allows. A symbolic link
#     there (a job may make one) is not followed out of it: the server checks the path as
#     written, so the agent refuses a path with a link on it (review: a link to /etc, mounted
#     by a second job, gave write access to the host).
mkdir -p "$TMP/mnt/data" "$TMP/outside"
stop_server
start_server --listen "$BERTH_ADDR" --node-unhealthy-after 2 --node-lost-after 4 \
  --allow-mount "$TMP/mnt"
some_agent_ready() { "$BERTH" nodes --format json | jq -e '[.nodes[].agent] | index("ready")'; }
wait_for 15 "an agent reconnecting" some_agent_ready
"$BERTH" run --gpus 1 -v "$TMP/mnt/data:/data" berth-test:1 sh -c 'echo hi > /data/written' ||
  fail "a job writing to its volume failed"
[ "$(cat "$TMP/mnt/data/written")" = hi ] || fail "the job's volume is not the host directory"
ln -s "$TMP/outside" "$TMP/mnt/data/esc"
link=$("$BERTH" run -d --gpus 1 -v "$TMP/mnt/data/esc:/host" berth-test:1 sh -c 'echo out > /host/written')
refused() { "$BERTH" inspect "$1" | grep -q 'esc is a symbolic link'; }
wait_for 30 "job $link refused for its link" refused "$link"
[ ! -e "$TMP/outside/written" ] || fail "a job wrote through a symbolic link out of the allowed directory"
"$BERTH" stop "$link" > /dev/null 2>&1 || true
echo "fleet: part 14" >&2
# 14. A node gone from the cluster file across a server restart: its job is lost and runs
#     elsewhere; its agent, told the server has no such node, removes the node's containers and
#     ends (review: it kept them running for ever, and the job ran twice).
for j in "$moved" "$stale"; do "$BERTH" stop "$j" > /dev/null; done  # room to run again
dropped=$("$BERTH" run -d --gpus 1 berth-test:1 sh -c "$TRAPPER")
wait_for 15 "job $dropped running" state_is "$dropped" running
here=""; [ "$(containers "berth.job=$dropped")" -eq 1 ] || here=second_engine
dnode=$($here _dk inspect -f '{{index .Config.Labels "berth.node"}}' \
  "$($here _dk ps -q --filter "label=berth.job=$dropped")")
{ sed -n '1,/^nodes:/p' "$FLEET"
  for n in n0 n1 n2; do [ "$n" = "$dnode" ] || echo "  - {name: $n, shape: small}"; done
} > "$TMP/without.yaml"
stop_server
CLUSTER=$TMP/without.yaml start_server --listen "$BERTH_ADDR" --node-unhealthy-after 2 \
  --node-lost-after 4 --allow-mount "$TMP/mnt"
wait_for 20 "node $dnode's agent ending" ended "${AGENT[$dnode]}"
grep -q "the server has no node $dnode" "$TMP/agent-$dnode.log" ||
  fail "node $dnode's agent did not say why it ended: $(tail "$TMP/agent-$dnode.log")"
[ "$($here containers "berth.node=$dnode")" -eq 0 ] ||
  fail "node $dnode's containers are left: $($here _dk ps -a)"
running_again() { state_is "$dropped" running; }
for _ in $(seq 400); do running_again && break; sleep 0.1; done
running_again || fail "job $dropped is not running again: $("$BERTH" inspect "$dropped" | jq -c '{state, reason, events: [.events[] | {state, reason}]}'); nodes: $("$BERTH" nodes)"
[ "$(runs_of "$dropped")" -eq 1 ] || fail "job $dropped should run once: $(runs_of "$dropped")"
# An agent started against a server it never reached that has no such node (a --server given
# wrong) says so and ends, and leaves the node's containers: that server knows nothing of them.
$here _dk run -d --name left-here --label "berth.node=$dnode" --label berth.job=999 \
  --label berth.replica=0 --label berth.placement=p1 berth-test:1 sleep 1000 > /dev/null
$here start_agent "$dnode"
wait_for 10 "node $dnode's new agent ending" ended "${AGENT[$dnode]}"
grep -q "leaves the node's containers" "$TMP/agent-$dnode.log" ||
  fail "the agent did not say it leaves them: $(tail -3 "$TMP/agent-$dnode.log")"
[ "$($here _dk inspect -f '{{.State.Running}}' left-here)" = true ] ||
  fail "an agent that never got in stopped the node's container"
$here _dk rm -f left-here > /dev/null

echo "fleet: ok"
