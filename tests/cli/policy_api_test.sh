#!/usr/bin/env bash
# The policy and queues of a running server, end to end: berth policy apply and berth queues
# apply (PUT /v1/policy, /v1/queues) against a real server with tokens, and berth cells
# --server (GET /v1/cells). Only admins apply; a bad file names its line and changes nothing; a
# policy or queues that would break a job is refused; what was applied takes effect at once
# (a priority class only the new policy has becomes usable), keeps the placed job where it is,
# shows in the event log, and outlives a restart whose flags say otherwise. berth policy show
# and queues show (GET /v1/policy, /v1/queues) print the files in force.
source "$(dirname "$0")/lib.sh"

alice=$("$BERTH" token new)
root=$("$BERTH" token new)
hash() { echo "$1" | "$BERTH" token hash; }
cat > "$TMP/tokens.yaml" <<EOT
tokens:
  - {sha256: $(hash "$alice"), user: alice, queues: ["*"]}
  - {sha256: $(hash "$root"), user: root, admin: true}
EOT
start_server --tokens "$TMP/tokens.yaml"
export BERTH_TOKEN=$root
as_alice() { BERTH_TOKEN=$alice "$BERTH" "$@"; }

# Before anything is applied: the built-in policy shows as a file of its base, which applies
# back unchanged, and there are no queues.
"$BERTH" policy show > "$TMP/shown.yaml" 2> "$TMP/from.txt"
grep -qxF 'base: berth' "$TMP/shown.yaml" || fail "policy show: $(cat "$TMP/shown.yaml")"
grep -qF "(built in)" "$TMP/from.txt" || fail "policy show says where it came from: $(cat "$TMP/from.txt")"
"$BERTH" queues show 2>/dev/null | grep -qxF 'virtualClusters: {}' || fail "queues show: $("$BERTH" queues show)"
for args in "queues show --format json" "queues --format json show"; do
  # shellcheck disable=SC2086
  "$BERTH" $args | jq -r .yaml | grep -qxF 'virtualClusters: {}' || fail "$args: $("$BERTH" $args)"
done

cat > "$TMP/gold.yaml" <<'EOT'
name: gold
priorityClasses: {prod: 1000, default: 100, opportunistic: -1, gold: 500}
EOT
printf 'priorityClass: gold\ngpus: 8\nimage: x\n' > "$TMP/gold-job.yaml"
BERTH_TOKEN=$alice expect_exit2 'priorityClass: unknown class "gold"' run -d -f "$TMP/gold-job.yaml"

# Only an admin applies; a mistake names the file and its line, and the server's own check
# names the line too (for a client that does not check first).
BERTH_TOKEN=$alice expect_exit2 "only an admin may change the policy; alice is not one" \
  policy apply "$TMP/gold.yaml"
BERTH_TOKEN=$alice expect_exit2 "only an admin may change the queues; alice is not one" \
  queues apply examples/vcs.yaml
printf 'name: bad\nagingCap: -1\n' > "$TMP/bad.yaml"
expect_exit2 "$TMP/bad.yaml:2:" policy apply "$TMP/bad.yaml"
put() { curl -s -o "$TMP/answer.json" -w '%{http_code}' -X PUT -H "Authorization: Bearer $root" \
  --data-binary "@$1" "http://$BERTH_ADDR$2"; }
[ "$(put "$TMP/bad.yaml" /v1/policy)" = 400 ] || fail "a bad policy: $(cat "$TMP/answer.json")"
grep -qF '"error":"policy:2:' "$TMP/answer.json" || fail "the 400: $(cat "$TMP/answer.json")"
head -c 2000000 /dev/zero | tr '\0' ' ' > "$TMP/big.yaml"
[ "$(put "$TMP/big.yaml" /v1/policy)" = 413 ] || fail "a body over 1 MiB: $(cat "$TMP/answer.json")"
BERTH_TOKEN=$alice expect_exit2 'priorityClass: unknown class "gold"' run -d -f "$TMP/gold-job.yaml"

# Applied: the placed job stays on its GPUs, the new class is usable at once.
first=$(as_alice run -d --gpus 8 trainer:1)
wait_state "$first" scheduled
gpus=$("$BERTH" inspect "$first" | jq -c .gpus)
out=$("$BERTH" policy apply "$TMP/gold.yaml")
[ "$out" = 'policy "gold" applied by root: 1 placed jobs kept at their GPUs, 0 pending jobs queued again' ] ||
  fail "policy apply: $out"
[ "$("$BERTH" inspect "$first" | jq -c .gpus)" = "$gpus" ] || fail "the placed job moved"
# The same apply again, for a script: the server's answer as JSON.
[ "$("$BERTH" policy apply --format json "$TMP/gold.yaml" | jq -r .reason)" = \
  'policy "gold" applied by root: 1 placed jobs kept at their GPUs, 0 pending jobs queued again' ] ||
  fail "policy apply --format json: $("$BERTH" policy apply --format json "$TMP/gold.yaml")"
gold=$(as_alice run -d -f "$TMP/gold-job.yaml")
wait_state "$gold" scheduled
"$BERTH" events | grep -qE '^[0-9]+  [-0-9T:]+  server  policy-applied  policy "gold" applied by root' ||
  fail "events: $("$BERTH" events)"
as_alice events | grep -qF 'policy-applied' || fail "a user sees the server's events too"

# A policy without the class would fail the gold job: refused, listing it.
printf 'name: plain\n' > "$TMP/plain.yaml"
expect_exit2 "the new policy would not keep 1 jobs as they are, so nothing was changed; job $gold (default): would be failed" \
  policy apply "$TMP/plain.yaml"
[ "$("$BERTH" inspect "$gold" | jq -r .state)" = scheduled ] || fail "the gold job changed"

# The cells as the server holds them: 16 of 32 GPUs used, two nodes whole.
"$BERTH" cells --server --format json > "$TMP/cells.json"
[ "$(json_get "$TMP/cells.json" '.tree.used')" = 16 ] || fail "cells: $(cat "$TMP/cells.json")"
[ "$(json_get "$TMP/cells.json" '.types[] | select(.level == "node") | .used')" = 2 ] ||
  fail "used nodes: $(cat "$TMP/cells.json")"
"$BERTH" cells --server | grep -qE '^  dgx-a100/node +node +8 +4 +2 +0 +2 +0 +0$' ||
  fail "cells --server: $("$BERTH" cells --server)"
# A cordoned node's idle GPUs are cordoned, not bad (nor free).
idle=$("$BERTH" nodes --format json | jq -r '[.nodes[] | select(.freeGpus == 8)][0].name')
"$BERTH" node cordon "$idle" > /dev/null
"$BERTH" cells --server --format json > "$TMP/cordoned.json"
[ "$(json_get "$TMP/cordoned.json" '[.tree.free, .tree.cordoned, .tree.bad, .tree.used] | map(tostring) | join(",")')" = "8,8,0,16" ] ||
  fail "cells with $idle cordoned: $(jq -c "[.tree.free, .tree.cordoned, .tree.bad, .tree.used]" "$TMP/cordoned.json")"
"$BERTH" cells --server | grep -qE '^  dgx-a100/node +node +8 +4 +1 +0 +2 +0 +1$' ||
  fail "cells --server with $idle cordoned: $("$BERTH" cells --server)"
"$BERTH" node uncordon "$idle" > /dev/null
as_alice cells --server > /dev/null || fail "any user sees the cells"
expect_exit2 "--cluster excludes --server" cells --server --cluster examples/dgx-a100.yaml
"$BERTH" cells --cluster examples/scenarios/clusters/dgx-4.yaml --format json > "$TMP/offline.json"
[ "$(json_get "$TMP/offline.json" '.tree.used')" = 0 ] || fail "offline cells hold nothing"

# Queues: a queue with jobs stays; guarantees the cluster cannot give are refused.
printf 'virtualClusters:\n  research: {guarantees: {dgx-a100/node: 1}}\n' > "$TMP/research.yaml"
out=$("$BERTH" queues apply "$TMP/research.yaml")
grep -qF 'queues research, default applied by root' <<<"$out" || fail "queues apply: $out"
r=$(as_alice run -d --queue research --gpus 1 trainer:1)
wait_state "$r" scheduled
printf 'virtualClusters:\n  other:\n' > "$TMP/other.yaml"
expect_exit2 'queue "research" has 1 jobs not ended (pending or placed), so it cannot be removed' \
  queues apply "$TMP/other.yaml"
printf 'virtualClusters:\n  research: {guarantees: {dgx-a100/node: 9}}\n' > "$TMP/too-big.yaml"
expect_exit2 "queues:2" queues apply "$TMP/too-big.yaml"
"$BERTH" queues | grep -qE '^research +1\.0 +8\.0 ' || fail "queues: $("$BERTH" queues)"

# A restart whose flags say berth and no VCs keeps what was applied, and says so.
stop_server
start_server --tokens "$TMP/tokens.yaml" --policy berth
grep -qF 'policy "gold" applied through the API (kept in the state; --policy not used); queues applied through the API (kept in the state; --vcs not used)' \
  "$TMP/server.log" || fail "the first log line: $(cat "$TMP/server.log")"
[ "$("$BERTH" inspect "$first" | jq -c .gpus)" = "$gpus" ] || fail "the placed job moved on restart"
[ "$("$BERTH" inspect "$gold" | jq -r .state)" = scheduled ] || fail "the gold job after a restart"
again=$(as_alice run -d -f "$TMP/gold-job.yaml")
[ "$("$BERTH" inspect "$again" | jq -r .state)" != failed ] || fail "gold refused after a restart"
"$BERTH" queues | grep -qE '^research ' || fail "queues after a restart: $("$BERTH" queues)"
# What is in force shows as the files applied, and a user may read them.
as_alice policy show > "$TMP/shown.yaml" 2> "$TMP/from.txt"
grep -qF "(applied through the API)" "$TMP/from.txt" || fail "policy show after a restart: $(cat "$TMP/from.txt")"
cmp "$TMP/shown.yaml" "$TMP/gold.yaml" || fail "policy show is not the file applied"
cmp <("$BERTH" queues show 2>/dev/null) "$TMP/research.yaml" || fail "queues show after a restart"
"$BERTH" policy apply "$TMP/shown.yaml" | grep -qF 'policy "gold" applied by root' ||
  fail "what policy show printed does not apply back"
# Show and apply again and again leave the file as it was, a byte order mark included.
printf '\xef\xbb\xbfname: bom\npriorityClasses: {prod: 1000, default: 100, opportunistic: -1, gold: 500}\n' > "$TMP/bom.yaml"
"$BERTH" policy apply "$TMP/bom.yaml" > /dev/null
for _ in 1 2; do
  "$BERTH" policy show > "$TMP/shown.yaml" 2>/dev/null
  "$BERTH" policy apply "$TMP/shown.yaml" > /dev/null || fail "a shown policy with a BOM does not apply back"
done
cmp "$TMP/shown.yaml" "$TMP/bom.yaml" || fail "show and apply changed the file"
echo "1 passed, 0 failed"
