# A server started without a cluster (--cluster none) grows one as agents register: before any
# node its API, cells and metrics answer and a job waits; a declared agent's node joins and the
# job runs there on a real engine; a second node joins; a kill -9 of the server and a restart
# keep both nodes and every job; a node that cannot join is told why.
source "$(dirname "$0")/../cli/lib.sh"
source "$SRC/tests/docker/dockerd.sh"
DK=$(mktemp -d /tmp/berth-join.XXXXXX)
declare -A AGENT=()
trap 'kill -9 ${AGENT[@]} 2>/dev/null || true; wait ${AGENT[@]} 2>/dev/null || true; stop_server; stop_dockerd; rm -rf "$TMP"' EXIT
start_dockerd "$DK"
build_test_image berth-test:1

CLUSTER=none start_server
[ "$("$BERTH" nodes --format json | jq '.nodes | length')" -eq 0 ] || fail "nodes before any joined: $("$BERTH" nodes)"
"$BERTH" cells > /dev/null || fail "berth cells on a cluster of no nodes"
curl -sf "http://$BERTH_ADDR/metrics" > "$TMP/metrics.txt" || fail "no metrics on a cluster of no nodes"
promtool check metrics < "$TMP/metrics.txt" || fail "metrics of a cluster of no nodes do not pass promtool"
early=$("$BERTH" run -d --gpus 2 berth-test:1 sh -c 'echo early on $CUDA_VISIBLE_DEVICES')
sleep 0.5
[ "$("$BERTH" inspect "$early" | jq -r .state)" = pending ] || fail "job $early before any node: $("$BERTH" inspect "$early")"

# The agents' declare file: nodes alpha and beta of tests/agent/data/one.yaml's small shape.
sed 's/{namePrefix: n, count: 1, shape: small}/{name: alpha, shape: small}\n  - {name: beta, shape: small}/' \
  tests/agent/data/one.yaml > "$TMP/hosts.yaml"
# start_agent NODE [FLAGS...]: the agent of a node declared by $TMP/hosts.yaml.
start_agent() {
  "$BERTH" agent --server "http://$BERTH_ADDR" --node "$1" --declare "$TMP/hosts.yaml" \
    --docker-socket "$DOCKER_SOCK" --heartbeat 0.2 "${@:2}" >> "$TMP/agent-$1.log" 2>&1 &
  AGENT[$1]=$!
  wait_line "$TMP/agent-$1.log" "${AGENT[$1]}" 'registered'
}
start_agent alpha
wait_state "$early" succeeded
grep -Eqx 'early on GPU-sim-alpha-[0-3],GPU-sim-alpha-[0-3]' <<<"$("$BERTH" logs "$early")" ||
  fail "job $early printed: $("$BERTH" logs "$early")"
grep -q 'node-joined.*node alpha joined the cluster' <<<"$("$BERTH" events)" || fail "no node-joined event: $("$BERTH" events)"

start_agent beta --label pool=blue
# Its label, from the agent, selects it.
printf 'gpus: 1\nnodeSelector: {pool: blue}\nimage: berth-test:1\ncommand: [echo, blue]\n' > "$TMP/blue.yaml"
blue=$("$BERTH" run -d -f "$TMP/blue.yaml")
wait_state "$blue" succeeded
"$BERTH" inspect "$blue" | jq -e '.events[] | select(.state == "scheduled") | .reason | test("beta/")' > /dev/null ||
  fail "the job selecting pool=blue should run on beta: $("$BERTH" inspect "$blue")"
[ "$("$BERTH" nodes --format json | jq -r '[.nodes[].name] | join(",")')" = alpha,beta ] ||
  fail "two nodes expected: $("$BERTH" nodes)"
long=()
for _ in 1 2; do long+=("$("$BERTH" run -d --gpus 4 berth-test:1 sh -c 'echo up; sleep 1000')"); done
for j in "${long[@]}"; do wait_state "$j" running; done
[ "$("$BERTH" ps --format json | jq -r '[.[].gpus[] | split("/")[0]] | unique | join(",")')" = alpha,beta ] ||
  fail "the two 4-GPU jobs should hold one node each: $("$BERTH" ps)"

# kill -9 of the server; the restart joins both nodes again from its state and adopts the jobs.
port=${BERTH_ADDR##*:}
stop_server
CLUSTER=none start_server --listen "127.0.0.1:$port"
grep -q '4 jobs in the state' "$TMP/server.log" || fail "the restart should find 4 jobs: $(cat "$TMP/server.log")"
[ "$("$BERTH" nodes --format json | jq '.nodes | length')" -eq 2 ] || fail "nodes after the restart: $("$BERTH" nodes)"
sleep 1
for j in "${long[@]}"; do
  [ "$("$BERTH" inspect "$j" | jq -r .state)" = running ] || fail "job $j after the restart: $("$BERTH" inspect "$j")"
  [ "$(_dk ps -q --filter "label=berth.job=$j" | wc -l)" -eq 1 ] || fail "job $j runs $(_dk ps -q --filter "label=berth.job=$j" | wc -l) times"
done

# Its agent back with another label relabels beta in place: its job keeps running, once.
kill -9 "${AGENT[beta]}"
wait "${AGENT[beta]}" 2>/dev/null || true
mv "$TMP/agent-beta.log" "$TMP/agent-beta-1.log"  # wait for the new agent's 'registered'
start_agent beta --label pool=green
grep -q 'node beta has other labels, as its agent registered: pool=green' <<<"$("$BERTH" events)" ||
  fail "no relabel event: $("$BERTH" events | tail -5)"
sleep 1
for j in "${long[@]}"; do
  [ "$("$BERTH" inspect "$j" | jq -r .state)" = running ] || fail "job $j after the relabel: $("$BERTH" inspect "$j")"
  [ "$(_dk ps -q --filter "label=berth.job=$j" | wc -l)" -eq 1 ] || fail "job $j runs $(_dk ps -q --filter "label=berth.job=$j" | wc -l) times after the relabel"
done

# A repeated or malformed --label stops the agent at once, naming it.
for bad in "--label pool=a --label pool=b|--label \"pool\" is given twice" \
  "--label a:b=1|a key of 1 to 253 letters"; do
  ! "$BERTH" agent --server "http://$BERTH_ADDR" --node alpha --declare "$TMP/hosts.yaml" \
    --docker-socket "$DOCKER_SOCK" ${bad%%|*} > "$TMP/bad-label.log" 2>&1 ||
    fail "the agent started with ${bad%%|*}"
  grep -qF -- "${bad#*|}" "$TMP/bad-label.log" || fail "${bad%%|*}: $(cat "$TMP/bad-label.log")"
done

# A node whose GPU model has another memory size than the joined nodes' cannot join.
sed -e 's/memoryMiB: 16384/memoryMiB: 8192/' -e 's/namePrefix: n,/namePrefix: gamma,/' \
  tests/agent/data/one.yaml > "$TMP/smaller.yaml"
"$BERTH" agent --server "http://$BERTH_ADDR" --node gamma0 --declare "$TMP/smaller.yaml" \
  --docker-socket "$DOCKER_SOCK" > "$TMP/agent-gamma.log" 2>&1 &
AGENT[gamma]=$!
wait_line "$TMP/agent-gamma.log" "${AGENT[gamma]}" 'cannot join the cluster'
grep -q 'GPU model "simulated" has 8192 MiB here and 16384 MiB' "$TMP/agent-gamma.log" ||
  fail "the refusal should say why: $(cat "$TMP/agent-gamma.log")"
[ "$("$BERTH" nodes --format json | jq '.nodes | length')" -eq 2 ] || fail "gamma joined: $("$BERTH" nodes)"
for j in "${long[@]}"; do "$BERTH" stop "$j" > /dev/null; done
