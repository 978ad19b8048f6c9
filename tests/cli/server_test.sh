#!/usr/bin/env bash
# berth server and its verbs (run, ps, inspect, stop, rm), end to end: a real server process on a loopback port
# with its state in a real SQLite file, driven through the berth binary. Covers the job
# lifecycle, refusals (exit 2, naming the field), a slow client, a body over the limit, and a
# kill -9 in a burst of 1,000 concurrent submissions: after the restart every acknowledged job
# is there exactly once and no GPU is held twice.
source "$(dirname "$0")/lib.sh"


BERTH_ADDR=127.0.0.1:1 expect_error "no server at 127.0.0.1:1" "$BERTH" ps

start_server --request-timeout 3
id=$("$BERTH" run -d --name train --gpus 8 trainer:1 sleep 1)
[ "$id" = 1 ] || fail "the first job's id is $id"
wait_state 1 scheduled
"$BERTH" ps | grep -E '^1 +train +default +.* scheduled +dgx-[0-3]/0-7 ' > /dev/null ||
  fail "ps does not show the placed job: $("$BERTH" ps)"
[ "$("$BERTH" inspect 1 | jq -r '.events | map(.state) | join(",")')" = "pending,scheduled" ] ||
  fail "the job's transitions: $("$BERTH" inspect 1)"
"$BERTH" queues | grep -qE '^default +1\.0 ' || fail "queues: $("$BERTH" queues)"
"$BERTH" nodes | grep -qE '^dgx-0 +- +A100-80GB +8 ' || fail "nodes: $("$BERTH" nodes)"
# top: the node holding the job is a row of 8 held GPUs, the queue uses 8 of 32.
top=$("$BERTH" top --once)
grep -qE '^dgx-[0-3] +########$' <<<"$top" || fail "top shows no full node: $top"
[ "$(grep -cE '^dgx-[0-3] +\.{8}$' <<<"$top")" = 3 ] || fail "top: the other nodes: $top"
grep -qE '^default +\[#{8}[|-]*\] +8\.0 / ' <<<"$top" || fail "top: the queue's usage: $top"
# Live into a pipe: frame after frame, with no terminal codes.
piped=$(timeout 2.5 "$BERTH" top --interval 1 | cat || true)
[ "$(grep -cE '^dgx-[0-3] +########$' <<<"$piped")" -ge 2 ] || fail "top into a pipe: $piped"
grep -q $'\033' <<<"$piped" && fail "top into a pipe wrote terminal codes: $(od -c <<<"$piped" | head)"
# In a terminal smaller than a frame (script gives it one): cut to its rows and columns, the
# last row saying what was left out, so that the head of the frame does not scroll away.
small=$(timeout 2.5 script -qec "stty rows 5 cols 40; $BERTH top --interval 1" /dev/null | tr -d '\r' |
  sed 's/\x1b\[[0-9;]*[A-Za-z]//g' || true)
grep -q '^\.\.\. [0-9]* more lines: a taller terminal' <<<"$small" || fail "top in a small terminal: $small"
[ "$(awk 'length > 40' <<<"$small" | wc -l)" -eq 0 ] || fail "top wrote lines wider than the terminal: $small"
# --format json on every verb that shows the server's state: its answer, for scripts.
[ "$("$BERTH" queues --format json | jq -r '.queues[] | select(.name == "default") | .usageGpus')" = 8 ] ||
  fail "queues --format json: $("$BERTH" queues --format json)"
[ "$("$BERTH" top --format json | jq -r '[.nodes[].gpuMap] | sort | join(",")')" = \
  "########,........,........,........" ] || fail "top --format json: $("$BERTH" top --format json)"
[ "$("$BERTH" policy show --format json | jq -r '.yaml | length > 0')" = true ] ||
  fail "policy show --format json: $("$BERTH" policy show --format json)"
[ "$("$BERTH" inspect 1 --format json | jq -r .state)" = scheduled ] || fail "inspect --format json"
expect_exit2 "--format" queues --format yaml

# A browser's cross-site request, or one through a name rebound to the loopback, is refused:
# without tokens every caller is an admin.
addr=$BERTH_ADDR
[ "$(curl -s -o "$TMP/cors.json" -w '%{http_code}' -H 'Origin: http://evil.example' \
  -H 'Content-Type: text/plain' --data-binary '{"gpus": 1}' "http://$addr/v1/jobs")" = 403 ] ||
  fail "a cross-origin submission should be refused: $(cat "$TMP/cors.json")"
grep -q "cross-origin request refused" "$TMP/cors.json" || fail "the refusal: $(cat "$TMP/cors.json")"
[ "$(curl -s -o "$TMP/host.json" -w '%{http_code}' -H "Host: evil.example:${addr##*:}" \
  "http://$addr/v1/jobs")" = 403 ] || fail "a foreign Host should be refused: $(cat "$TMP/host.json")"
grep -q "answers only requests addressed to the loopback" "$TMP/host.json" ||
  fail "the refusal: $(cat "$TMP/host.json")"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: 127.0.0.1:${addr##*:}.evil.example" \
  "http://$addr/v1/jobs")" = 403 ] || fail "a loopback Host with more after its port should be refused"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Origin: http://$addr" "http://$addr/v1/jobs")" = 200 ] ||
  fail "a same-origin request should be answered"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: localhost:${addr##*:}" "http://$addr/v1/jobs")" = 200 ] ||
  fail "localhost should be answered"
[ "$("$BERTH" ps -a -q | wc -l)" -eq 1 ] || fail "a refused job was kept: $("$BERTH" ps -a)"
# A parameter given twice is refused, not read one way or the other.
[ "$(curl -s -o "$TMP/twice.json" -w '%{http_code}' "http://$addr/v1/jobs?limit=1&limit=1")" = 400 ] ||
  fail "a repeated parameter should be a 400: $(cat "$TMP/twice.json")"
grep -q 'parameter \\"limit\\" is given more than once' "$TMP/twice.json" ||
  fail "the refusal should name the parameter: $(cat "$TMP/twice.json")"

# The body of a refused POST is not read as a next request on the same connection.
second=$(curl -s -o /dev/null -w '%{http_code}' -d '{"image": "x"}' "http://$addr/v1/jobs?a=1&a=1" \
  --next -s -o /dev/null -w ' %{http_code}' "http://$addr/v1/jobs")
[ "$second" = "400 200" ] || fail "a request after a refused POST: $second"

# Refusals name the field and change nothing.
expect_exit2 "no node of this cluster can ever hold it" run -d --gpus 9 trainer:1
printf 'gpus: 1\ncolour: red\n' > "$TMP/bad.yaml"
expect_exit2 "$TMP/bad.yaml:2:1: unknown field \"colour\"" run -d -f "$TMP/bad.yaml"
expect_exit2 'unknown queue "nope"' run -d --queue nope trainer:1
expect_exit2 '--name: give a name, or leave the flag out' run -d --name "" trainer:1
expect_exit2 '--queue: no queue "nope" on the server; its queues: default' ps --queue nope
expect_exit2 '--queue: no queue "nope"' ps -a --format json --queue nope
"$BERTH" ps --queue default > /dev/null || fail "berth ps --queue default with no jobs"
expect_exit2 "no node agent is connected" run trainer:1
head -c 2000000 /dev/zero | tr '\0' ' ' > "$TMP/big.yaml"
expect_exit2 "over the server's limit of 1048576 bytes" run -d -f "$TMP/big.yaml"
expect_exit2 "expected a job id" inspect train
expect_exit2 "no job 99 (\`berth ps -a\` lists the jobs)" inspect 99
out=$("$BERTH" logs -f 99 2>&1) && fail "berth logs -f of no job should fail"
[ "$out" = "berth: no job 99 (\`berth ps -a\` lists the jobs)" ] || fail "berth logs -f of no job: $out"
expect_exit2 "no node nope (\`berth nodes\` lists the nodes)" node cordon nope
expect_exit2 "is scheduled; stop it first" rm 1
[ "$("$BERTH" ps -a -q | wc -l)" -eq 1 ] || fail "a refused job was kept: $("$BERTH" ps -a)"

# A client that sends half a request holds one worker, not the server.
exec 3<>"/dev/tcp/${BERTH_ADDR%:*}/${BERTH_ADDR##*:}"
printf 'POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{' >&3
"$BERTH" ps -q | grep -qx 1 || fail "a slow client blocks the others"
exec 3>&-

# A spec from a file that names no user is the login's, as one made of flags (review).
printf 'gpus: 1\nimage: trainer:1\n' > "$TMP/nouser.yaml"
carol=$(USER=carol "$BERTH" run -d -f "$TMP/nouser.yaml")
[ "$("$BERTH" inspect "$carol" | jq -r .user)" = carol ] || fail "run -f without a user: $("$BERTH" inspect "$carol")"
job=$(env -u USER "$BERTH" run -d -f "$TMP/nouser.yaml")
[ "$("$BERTH" inspect "$job" | jq -r .user)" = "$(id -un)" ] || fail "run -f with USER unset"
"$BERTH" stop "$carol" "$job" > /dev/null
"$BERTH" rm "$carol" "$job" > /dev/null
# -f - reads the spec from standard input, and the server's errors point into it as stdin.
piped=$(printf 'gpus: 1\nimage: trainer:1\n' | "$BERTH" run -d -f -)
"$BERTH" inspect "$piped" | jq -r .spec | grep -q trainer:1 || fail "run -f -: $("$BERTH" inspect "$piped")"
rc=0
out=$(printf 'gpus: 1\nimage: Trainer\n' | "$BERTH" run -d -f - 2>&1) || rc=$?
[ "$rc" -eq 2 ] && grep -q '^berth: stdin:2:[0-9]*: image: "Trainer" is not an image reference' <<<"$out" ||
  fail "run -f - with a bad image should point into stdin (exit 2), exit $rc: $out"
"$BERTH" stop "$piped" > /dev/null
"$BERTH" rm "$piped" > /dev/null

# More trickling clients than the server has workers, each sending a header line a second and
# never finishing its request: each is cut at the request deadline (3 s here), and the others
# are served again. Without the deadline they would hold every worker for as long as they like.
trickle() {
  trap '' PIPE  # a write to the cut connection fails instead of killing the client
  exec 3<>"/dev/tcp/${BERTH_ADDR%:*}/${BERTH_ADDR##*:}" || return 0
  printf 'GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n' >&3 || return 0
  for i in $(seq 30); do
    sleep 1
    printf 'X-Slow-%d: y\r\n' "$i" >&3 2>/dev/null || { echo "cut after $i s" >> "$TMP/cut"; return 0; }
  done
}
for _ in $(seq 120); do trickle & done
sleep 1
timeout 20 "$BERTH" ps -q > /dev/null || fail "trickling clients starve the server"
for _ in $(seq 100); do [ "$(wc -l < "$TMP/cut" 2>/dev/null || echo 0)" -ge 120 ] && break; sleep 0.1; done
[ "$(wc -l < "$TMP/cut")" -ge 120 ] || fail "only $(wc -l < "$TMP/cut") of 120 trickling clients were cut"
latest=$(sed -n 's/cut after \([0-9]*\) s/\1/p' "$TMP/cut" | sort -n | tail -1)
[ "$latest" -le 10 ] || fail "a trickling client was cut late: $(sort "$TMP/cut" | uniq -c)"

# A chunked body is counted too (the library bounds only a Content-Length body).
exec 3<>"/dev/tcp/${BERTH_ADDR%:*}/${BERTH_ADDR##*:}"
{
  printf 'POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n'
  chunk=$(head -c 65536 /dev/zero | tr '\0' ' ')
  for _ in $(seq 20); do printf '10000\r\n%s\r\n' "$chunk"; done
  printf '0\r\n\r\n'
} >&3 2>/dev/null || true
head -1 <&3 | grep -q '413' || fail "a chunked body over the limit was not refused with 413"
exec 3>&-

exec 3<>"/dev/tcp/${BERTH_ADDR%:*}/${BERTH_ADDR##*:}"
printf 'POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000\r\n\r\n' >&3
timeout 5 head -1 <&3 | grep -q '413' || fail "a Content-Length over the limit was not refused at once"
exec 3>&-

# One value per -e or --gpu-model: the image after them stays the image.
id=$("$BERTH" run -d -e A=1 -e B=2 --gpu-model A100-80GB trainer:1 sh -c 'echo hi')
[ "$("$BERTH" inspect "$id" | jq -r '.spec | fromjson | [.image, (.command | join(" ")), .env.B] | join("|")')" = "trainer:1|sh -c echo hi|2" ] ||
  fail "run -e/--gpu-model: $("$BERTH" inspect "$id")"
# --format json: what became of each job, the failures included.
set +e
out=$("$BERTH" stop "$id" 99 --format json 2> /dev/null)
code=$?
set -e
[ "$code" = 2 ] && [ "$(jq -c '[.[0].id, .[0].state, .[1].id, (.[1].error | startswith("no job 99"))]' <<<"$out")" =   "[$id,\"stopped\",99,true]" ] || fail "stop --format json (exit $code): $out"

# Several jobs at once, as docker's stop and rm: one that cannot be is said, the rest still go.
other=$("$BERTH" run -d --gpus 1 trainer:1 sleep 1)
set +e
out=$("$BERTH" stop 1 99 x "$other" 2> "$TMP/stop.err")
code=$?
set -e
[ "$code" = 2 ] || fail "stop with an unknown job should exit 2, exited $code"
[ "$out" = "$(printf '1\n%s' "$other")" ] || fail "stop prints the stopped ids: $out"
grep -q "no job 99" "$TMP/stop.err" && grep -q 'expected a job id.*"x"' "$TMP/stop.err" &&
  grep -q "2 of 4 jobs failed" "$TMP/stop.err" || fail "stop's errors: $(cat "$TMP/stop.err")"
for j in 1 "$other"; do
  [ "$("$BERTH" inspect "$j" | jq -r .state)" = stopped ] || fail "stop: $("$BERTH" inspect "$j")"
done
out=$("$BERTH" ps -q)  # a failing ps fails the test here (set -e), it does not pass the check
[ -z "$out" ] || fail "ps lists a stopped job without -a: $out"
[ "$("$BERTH" rm 1 "$other" | tr '\n' ' ')" = "1 $other " ] || fail "rm prints the ids"
[ "$("$BERTH" rm "$id" --format json | jq -c .)" = "[{\"id\":$id}]" ] || fail "rm --format json"
out=$("$BERTH" ps -a -q)
[ -z "$out" ] || fail "rm left the job: $out"

# One server per state: a second one would overwrite the first one's jobs.
expect_error "another berth server uses this state" "$BERTH" server --listen 127.0.0.1:0 \
  --state "$TMP/state"

# kill -9 in a burst of 1,000 submissions from 20 concurrent clients; the bench writes each id
# to the acks file as the server acknowledges it.
"$BERTH" bench api --clients 20 --jobs 1000 --acks "$TMP/acks" > "$TMP/bench.out" 2>&1 &
BENCH=$!
for _ in $(seq 1000); do
  [ "$(cat "$TMP/acks" 2>/dev/null | wc -l)" -ge 200 ] && break
  sleep 0.01
done
kill -9 "$SERVER"
wait "$SERVER" 2>/dev/null || true
SERVER=
wait "$BENCH" 2>/dev/null || true
acked=$(sort -n "$TMP/acks")
[ -n "$acked" ] || fail "nothing was acknowledged: $(cat "$TMP/bench.out")"
echo "acknowledged before the kill: $(wc -l <<<"$acked") of 1000"
start_server --request-timeout 3
grep -q "jobs in the state" "$TMP/server.log" || fail "no recovery summary"
# Ids are never given twice, not even those of removed jobs (1 and 2 above).
new=$("$BERTH" run -d --gpus 1 trainer:1)
last=$(tail -1 <<<"$acked")
[ "$new" -gt "$last" ] && [ "$new" -gt 2 ] || fail "id $new given again (last acknowledged $last)"
"$BERTH" stop "$new" > /dev/null
"$BERTH" ps -a -q | sort -n > "$TMP/after"
[ -z "$(uniq -d "$TMP/after")" ] || fail "a job is listed twice after the restart"
# comm needs both sorted as text (ids sorted as numbers, 99 before 100, made it fail).
missing=$(comm -23 <(sort <<<"$acked") <(sort "$TMP/after"))
[ -z "$missing" ] || fail "acknowledged jobs lost by the kill: $missing"
# A cycle places what fits (again, if the kill came before the placements were saved).
held_once() {
  "$BERTH" ps --format json |
    jq -e '[.[] | select(.state == "scheduled") | .gpus[]] | (length == 32) and (length == (unique | length))' \
      > /dev/null
}
for _ in $(seq 100); do held_once && break; sleep 0.1; done
held_once || fail "after the restart the GPUs are not each held once: $("$BERTH" nodes)"

# run -d for a script: the submitted job as the server answers.
submitted=$("$BERTH" run -d --format json --name scripted --gpus 1 trainer:1)
[ "$(jq -r '"\(.name) \(.state)"' <<<"$submitted")" = "scripted pending" ] &&
  [ "$(jq -r .id <<<"$submitted")" -gt 1 ] || fail "run -d --format json: $submitted"
expect_exit2 "goes with -d" run --format json trainer:1

# raw_reply SECONDS REQUEST: the server's whole answer to REQUEST sent as is on a new connection,
# as far as it comes within SECONDS.
raw_reply() {
  exec 3<>"/dev/tcp/${BERTH_ADDR%:*}/${BERTH_ADDR##*:}"
  printf '%b' "$2" >&3
  timeout "$1" cat <&3 || true
  exec 3>&-
}
# expect_raw SECONDS STATUS TEXT WHAT REQUEST: the answer to the raw REQUEST has STATUS and,
# unless TEXT is empty, TEXT; else the test fails naming WHAT.
expect_raw() {
  local reply
  reply=$(raw_reply "$1" "$5")
  grep -q "^HTTP/1.1 $2" <<<"$reply" && { [ -z "$3" ] || grep -qF -- "$3" <<<"$reply"; } ||
    fail "$4: $reply"
}
# A client that stops mid-body (under the request deadline) is told its body timed out; broken
# chunked framing and a missing length are the client's errors, said at once.
stop_server
start_server
post='POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n'
close="${post}Connection: close\r\n"
expect_raw 20 408 'stopped arriving' "a stalled body" "${post}Content-Length: 100\r\n\r\n{"
expect_raw 5 400 'chunked framing is broken' "a body with broken chunks" \
  "${close}Transfer-Encoding: chunked\r\n\r\nZZZ\r\n"
# A POST with neither Content-Length nor chunks (curl -X POST without -d) is told so at once,
# not after the read timeout.
expect_raw 5 411 'send Content-Length: 0' "a POST without Content-Length" \
  'POST /v1/jobs/1/stop HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'
expect_raw 5 501 'is not served' "a coding other than chunked" \
  "${close}Transfer-Encoding: gzip\r\n\r\n{}"
expect_raw 5 501 'is not served' "chunked after another coding" \
  "${close}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
# Codings are named in any case: a chunked body sent as "Chunked" is read.
expect_raw 5 400 'missing required field \"image\"' "a body sent Chunked" \
  "${close}Transfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
# Two lengths, or a junk one, are refused (a proxy reading the other one is how requests are
# smuggled); nothing is submitted.
before=$("$BERTH" ps -a -q | wc -l)
expect_raw 5 400 'Content-Length is given 2 times' "two Content-Length headers" \
  "${close}Content-Length: 26\r\nContent-Length: 5\r\n\r\n{\"image\": \"x\", \"gpus\": 1}"
expect_raw 5 400 'Content-Length: expected the body' "a negative Content-Length" \
  "${close}Content-Length: -1\r\n\r\n{}"
expect_raw 5 400 'both given' "Content-Length with Transfer-Encoding" \
  "${close}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
[ "$("$BERTH" ps -a -q | wc -l)" -eq "$before" ] || fail "a refused request submitted a job"

# Watches are 32 at most. Followers that are killed give theirs back within seconds, plain log
# follows of a quiet job too, to which nothing is written that could fail (review: a minute).
quiet=$("$BERTH" run -d --gpus 1 quiet:1 true)
follow_code() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 1 \
    "http://$BERTH_ADDR/v1/jobs/$quiet/logs?follow=1" || true
}
followers=()
for _ in $(seq 32); do
  curl -sN -o /dev/null "http://$BERTH_ADDR/v1/jobs/$quiet/logs?follow=1" &
  followers+=($!)
done
for _ in $(seq 50); do [ "$(follow_code)" = 503 ] && break; sleep 0.1; done
[ "$(follow_code)" = 503 ] || fail "a 33rd watch should be refused"
kill -9 "${followers[@]}"
wait "${followers[@]}" 2>/dev/null || true
back=""
for _ in $(seq 10); do [ "$(follow_code)" = 200 ] && back=1 && break; sleep 0.5; done
[ -n "$back" ] || fail "killed plain log followers still hold the watches"

kill -TERM "$SERVER"
wait "$SERVER" || fail "the server did not stop cleanly on SIGTERM"
SERVER=
grep -q "berth server: stopped" "$TMP/server.log" || fail "no clean stop: $(cat "$TMP/server.log")"

# --expect-agents: every node's agent is expected from the start; none comes here, so the nodes
# turn unhealthy, then lost, and the job placed meanwhile goes back to pending (without the
# flag it waits `scheduled`, as above).
rm -rf "$TMP/state"
start_server --expect-agents --node-unhealthy-after 1 --node-lost-after 2
id=$("$BERTH" run -d --gpus 1 x:1 true)
lost() {
  [ "$("$BERTH" nodes --format json | jq '[.nodes[] | select(.agent != "lost")] | length')" = 0 ] &&
    [ "$("$BERTH" inspect "$id" | jq -r .state)" = pending ]
}
for _ in $(seq 100); do lost && break; sleep 0.1; done
lost || fail "nodes without agents should be lost, their job pending: $("$BERTH" nodes; "$BERTH" inspect "$id")"
said_why() {
  "$BERTH" events --format json | jq -se 'any(.[]; .state == "unhealthy" and
    (.reason | contains("its agent has not registered since the server started")))' > /dev/null
}
for _ in $(seq 50); do said_why && break; sleep 0.1; done
said_why || fail "the events should say no agent came: $("$BERTH" events)"
expect_exit2 "--expect-agents: not used with --k8s" server --k8s --expect-agents
expect_exit2 "--expect-agents: nodes that join (--cluster none) are always watched so" server \
  --cluster none --expect-agents
stop_server
echo "1 passed, 0 failed"
