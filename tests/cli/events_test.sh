#!/usr/bin/env bash
# The event log and node actions end to end, through the berth binary against a real server:
# drain evicts a node's job and it lands elsewhere; the cordon outlives a kill -9; `berth
# events -f` follows the log across that kill and the restart, resuming after the last event
# it printed, so every event shows exactly once and in order.
source "$(dirname "$0")/lib.sh"
FOLLOW=
trap '[ -z "$FOLLOW" ] || kill "$FOLLOW" 2>/dev/null; stop_server; rm -rf "$TMP"' EXIT

start_server
port=${BERTH_ADDR##*:}
"$BERTH" events -f --format json > "$TMP/follow" 2> "$TMP/follow.err" &
FOLLOW=$!
id=$("$BERTH" run -d --gpus 8 trainer:1)
for _ in $(seq 100); do
  node=$("$BERTH" inspect "$id" | jq -r '.gpus[0] // empty' | cut -d/ -f1)
  [ -n "$node" ] && break
  sleep 0.1
done
[ -n "$node" ] || fail "job $id was never placed"
[ "$("$BERTH" node drain "$node")" = "$node" ] || fail "node drain prints the node"
"$BERTH" nodes | grep -qE "^$node .* cordoned +none$" || fail "nodes after the drain: $("$BERTH" nodes)"
for _ in $(seq 100); do
  now=$("$BERTH" inspect "$id" | jq -r '.gpus[0] // empty' | cut -d/ -f1)
  [ -n "$now" ] && [ "$now" != "$node" ] && break
  sleep 0.1
done
[ -n "$now" ] && [ "$now" != "$node" ] || fail "the drained job did not move: $("$BERTH" inspect "$id")"
expect_exit2 "no node nope" node cordon nope

# kill -9 and a restart on the same port: the follower resumes, the cordon is still there.
kill -9 "$SERVER"
wait "$SERVER" 2>/dev/null || true
SERVER=
sleep 0.5
start_server --listen "127.0.0.1:$port"
grep -q "1 node cordoned" "$TMP/server.log" || fail "the cordon was lost: $(cat "$TMP/server.log")"
"$BERTH" nodes | grep -qE "^$node .* cordoned +none$" || fail "nodes after the restart: $("$BERTH" nodes)"
second=$("$BERTH" run -d --gpus 1 trainer:1)
"$BERTH" node uncordon "$node" > /dev/null
for _ in $(seq 200); do
  grep -q "\"node\":\"$node\".*\"state\":\"uncordoned\"" "$TMP/follow" &&
    grep -q "\"job\":$second.*\"state\":\"scheduled\"" "$TMP/follow" && break
  sleep 0.1
done
kill "$FOLLOW"
FOLLOW=
"$BERTH" events --format json > "$TMP/log"
jq -s 'map(.seq)' "$TMP/follow" > "$TMP/followed.seq"
jq -s 'map(.seq)' "$TMP/log" > "$TMP/log.seq"
cmp -s "$TMP/followed.seq" "$TMP/log.seq" ||
  fail "the follower saw $(tr -d ' \n' < "$TMP/followed.seq"), the log holds $(tr -d ' \n' < "$TMP/log.seq"); $(cat "$TMP/follow.err")"
jq -e -s 'map(.seq) | (. == sort) and (. == unique)' "$TMP/follow" > /dev/null ||
  fail "events out of order or twice"
[ "$(jq -r -s "map(select(.job == $id) | .state) | join(\",\")" "$TMP/log")" = \
  "pending,scheduled,preempted,pending,scheduled" ] || fail "job $id's events: $(cat "$TMP/log")"
[ "$(jq -r -s 'map(select(.node) | .state) | join(",")' "$TMP/log")" = "drained,uncordoned" ] ||
  fail "node events: $(cat "$TMP/log")"
# --since: what follows an event number.
[ "$("$BERTH" events --since 2 --format json | jq -s length)" -eq \
  "$(( $(jq -s length "$TMP/log") - 2 ))" ] || fail "events --since 2"
# A cursor past the log's end (another server's log, a reset state) is refused, not waited on.
newest=$(jq -s 'map(.seq) | max' "$TMP/log")
"$BERTH" events --since "$newest" > /dev/null || fail "events --since the newest event"
expect_exit2 "since: 999999 is past the newest event, $newest" events --since 999999
expect_exit2 "ask again with since=0" events -f --since 999999
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$BERTH_ADDR/v1/jobs/$id/events?since=999999")" = 400 ] ||
  fail "a job's events past the log's end are not refused"
[ "$(curl -s "http://$BERTH_ADDR/v1/jobs/$id/events?since=$newest" | jq '.events | length')" = 0 ] ||
  fail "a job's events since the newest"
# A removed job's events go, but a cursor past them stays good: the next event comes after it.
gone=$("$BERTH" run -d --gpus 1 trainer:1)
"$BERTH" stop "$gone" > /dev/null
last=$("$BERTH" events --format json | jq -s 'map(.seq) | max')
"$BERTH" rm "$gone" > /dev/null
"$BERTH" events --since "$last" > /dev/null || fail "events --since the removed job's last event"
echo "1 passed, 0 failed"
