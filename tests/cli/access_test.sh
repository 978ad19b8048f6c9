#!/usr/bin/env bash
# Access control end to end: a real server with a tokens file and TLS (a self-signed
# certificate made by openssl), driven through the berth binary. Users see and stop only their
# own jobs and submit only to their queues; admins see all; agent tokens are for agents; no
# token, a wrong token, an untrusted certificate and plain HTTP against TLS are refused with a
# message saying what to do; and the server refuses to serve a network address without tokens
# and TLS.
source "$(dirname "$0")/lib.sh"

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2> /dev/null
alice=$("$BERTH" token new)
bob=$("$BERTH" token new)
root=$("$BERTH" token new)
agent=$("$BERTH" token new)
[ "$alice" != "$bob" ] && [[ "$alice" =~ ^berth_[0-9a-f]{64}$ ]] || fail "token new: $alice $bob"
hash() { echo "$1" | "$BERTH" token hash; }
cat > "$TMP/tokens.yaml" <<EOT
tokens:
  - {sha256: $(hash "$alice"), user: alice, queues: [research]}
  - {sha256: $(hash "$bob"), user: bob, queues: ["*"]}
  - {sha256: $(hash "$root"), user: root, admin: true}
  - {sha256: $(hash "$agent"), user: node-1, kind: agent}
EOT
printf 'virtualClusters:\n  research: {guarantees: {dgx-a100/node: 1}}\n  other:\n' > "$TMP/vcs.yaml"

# A tokens file holds hashes, never tokens, and names what is wrong where.
printf 'tokens:\n  - {sha256: %s, user: eve}\n' "$alice" > "$TMP/bad-tokens.yaml"
expect_exit2 "bad-tokens.yaml:2:14: tokens[0].sha256: expected the token's SHA-256" \
  server --state "$TMP/s" --tokens "$TMP/bad-tokens.yaml"
printf 'tokens:\n  - {sha256: %s, user: a}\n  - {sha256: %s, user: b}\n' "$(hash "$bob")" \
  "$(hash "$bob")" > "$TMP/bad-tokens.yaml"
expect_exit2 "tokens[1].sha256: the same token is listed twice" \
  server --state "$TMP/s" --tokens "$TMP/bad-tokens.yaml"

# Only loopback without tokens and TLS; both halves of TLS or neither.
expect_exit2 "0.0.0.0 is not loopback, and the server would be open to the network" \
  server --listen 0.0.0.0:0 --state "$TMP/s"
expect_exit2 "0.0.0.0 is not loopback" server --listen 0.0.0.0:0 --state "$TMP/s" \
  --tokens "$TMP/tokens.yaml"
expect_exit2 "--request-timeout: expected seconds from 1 to 3600, got nan" server \
  --state "$TMP/s" --request-timeout nan
expect_exit2 "--tls-cert and --tls-key: give both" server --state "$TMP/s" \
  --tls-cert "$TMP/cert.pem"
expect_exit2 "cannot load" server --state "$TMP/s" --tls-cert "$TMP/tokens.yaml" \
  --tls-key "$TMP/key.pem"
[ ! -e "$TMP/s/berth.db" ] || fail "a refused server created its state"

# With both, any address: here all of them, reached through loopback.
start_server --listen 0.0.0.0:0 --tokens "$TMP/tokens.yaml" --tls-cert "$TMP/cert.pem" \
  --tls-key "$TMP/key.pem" --vcs "$TMP/vcs.yaml"
grep -q 'listening on https://0.0.0.0:[0-9]* (state .*; tokens required;' "$TMP/server.log" ||
  fail "the server's first line: $(cat "$TMP/server.log")"
BERTH_ADDR=https://127.0.0.1:${BERTH_ADDR##*:}
expect_error "is not trusted: set BERTH_CACERT" "$BERTH" ps
# A CA file that is not there is named, not taken for a server that is not there.
BERTH_CACERT=$TMP/absent.pem expect_exit2 "BERTH_CACERT: cannot read $TMP/absent.pem: No such file" ps
BERTH_CACERT=$TMP expect_exit2 "BERTH_CACERT: $TMP holds no PEM certificate" ps
export BERTH_CACERT=$TMP/cert.pem
BERTH_ADDR=${BERTH_ADDR#https://} expect_error \
  "closed the connection without an answer (it stopped, or it is not a berth server, or it serves HTTPS: then set BERTH_ADDR=https://" "$BERTH" ps
expect_exit2 "this server needs a token: set BERTH_TOKEN" ps
BERTH_TOKEN=berth_0000 expect_exit2 "the token is not in the server's tokens file" ps
BERTH_TOKEN=$agent expect_exit2 "an agent token may call only the agent API" ps

code() { curl -s -o /dev/null -w '%{http_code}' --cacert "$TMP/cert.pem" "$@"; }
# An agent token acts for its own node only.
[ "$(code -H "Authorization: Bearer $agent" "$BERTH_ADDR/v1/agents/node-2/assignments")" = 403 ] ||
  fail "node-1's agent token should not act for node-2"
[ "$(code -H "Authorization: Bearer $agent" "$BERTH_ADDR/v1/agents/node-1/assignments")" != 403 ] ||
  fail "node-1's agent token should act for node-1"
# Metrics need a token as well; probes do not.
[ "$(code "$BERTH_ADDR/metrics")" = 401 ] || fail "metrics without a token"
[ "$(code -H "Authorization: Bearer $bob" "$BERTH_ADDR/metrics")" = 200 ] || fail "metrics with one"
[ "$(code "$BERTH_ADDR/healthz")" = 200 ] || fail "healthz needs no token"
# The scheme's case does not matter; a token with a newline is refused by the CLI, not sent.
[ "$(code -H "Authorization: bearer $bob" "$BERTH_ADDR/metrics")" = 200 ] || fail "bearer, lowercase"
BERTH_TOKEN="$bob"$'\n' expect_exit2 "BERTH_TOKEN: holds a control character" ps
BERTH_TOKEN="$bob"$'\r\nX-Extra: 1' expect_exit2 "BERTH_TOKEN: holds a control character" ps

as() { local token=$1; shift; BERTH_TOKEN=$token "$BERTH" "$@"; }
a1=$(as "$alice" run -d --queue research --gpus 1 trainer:1)
b1=$(as "$bob" run -d --queue other --gpus 1 trainer:1)
[ "$(as "$alice" inspect "$a1" | jq -r .user)" = alice ] || fail "alice's job: $(as "$root" ps)"
[ "$(as "$bob" inspect "$b1" | jq -r .user)" = bob ] || fail "bob's job: $(as "$root" ps)"
BERTH_TOKEN=$alice expect_exit2 'queue: alice may not submit to queue "other"; the tokens file allows: research' \
  run -d --queue other --gpus 1 trainer:1
printf 'queue: research\nuser: bob\ngpus: 1\nimage: x\n' > "$TMP/as-bob.yaml"
BERTH_TOKEN=$alice expect_exit2 "user: the token is alice's, and a job cannot be submitted as \"bob\"" \
  run -d -f "$TMP/as-bob.yaml"

# Another user's job is not there for alice: not listed, not shown, not stopped, not removed.
[ "$(as "$alice" ps -a -q)" = "$a1" ] || fail "alice's ps: $(as "$alice" ps -a)"
BERTH_TOKEN=$alice expect_exit2 "no job $b1" inspect "$b1"
BERTH_TOKEN=$alice expect_exit2 "no job $b1" stop "$b1"
BERTH_TOKEN=$alice expect_exit2 "no job $b1" rm "$b1"
[ "$(as "$root" inspect "$b1" | jq -r .state)" != stopped ] || fail "alice stopped bob's job"
# The admin sees and stops everyone's.
[ "$(as "$root" ps -a -q | sort -n | tr '\n' ' ')" = "$a1 $b1 " ] ||
  fail "the admin's ps: $(as "$root" ps -a)"
as "$root" stop "$b1" > /dev/null
[ "$(as "$bob" inspect "$b1" | jq -r .state)" = stopped ] || fail "the admin's stop"
# Only admins act on nodes; everyone sees the nodes' events, and only their own jobs'.
BERTH_TOKEN=$alice expect_exit2 "only an admin may cordon, uncordon or drain a node; alice is not one" \
  node cordon dgx-3
# Refused before the request is looked at: a wrong request from a non-admin hears 403 too.
answer=$(code -X PUT -H "Authorization: Bearer $alice" --data-binary 'not: [a policy' \
  "$BERTH_ADDR/v1/policy?x=1&x=2")
[ "$answer" = 403 ] || fail "alice's malformed policy change: $answer"
answer=$(code -X POST -H "Authorization: Bearer $alice" --data-binary "" \
  "$BERTH_ADDR/v1/nodes/dgx-3/drain?x=1&x=2")
[ "$answer" = 403 ] || fail "alice's malformed drain: $answer"
[ "$(as "$root" node cordon dgx-3 --format json | jq -c .)" = '{"action":"cordon","node":"dgx-3"}' ] ||
  fail "node cordon --format json"
[ "$(as "$alice" events --format json | jq -r -s 'map(.job // .node) | unique | join(",")')" = \
  "$a1,dgx-3" ] || fail "alice's events: $(as "$alice" events)"
[ "$(as "$root" events --format json | jq -r -s 'map(.job // .node) | unique | join(",")')" = \
  "$a1,$b1,dgx-3" ] || fail "the admin's events: $(as "$root" events)"

# A user holds at most 8 watches (log follows and event watches). Followers that go, even
# killed, give theirs back: a quiet job's follower gets an empty frame every 5 s, which finds
# them gone.
follow() {
  curl -sN --cacert "$TMP/cert.pem" -H "Authorization: Bearer $alice" -o /dev/null \
    -w '%{http_code}' --max-time "$1" "$BERTH_ADDR/v1/jobs/$a1/logs?follow=1&frames=1"
}
followers=()  # curl itself, so that kill -9 ends the connection
for _ in $(seq 8); do
  curl -sN --cacert "$TMP/cert.pem" -H "Authorization: Bearer $alice" -o /dev/null \
    "$BERTH_ADDR/v1/jobs/$a1/logs?follow=1&frames=1" &
  followers+=($!)
done
for _ in $(seq 50); do [ "$(follow 1 || true)" = 429 ] && break; sleep 0.1; done
[ "$(follow 1 || true)" = 429 ] || fail "alice's ninth watch should be refused"
grep -q "alice already holds 8 watches" <<<"$(BERTH_TOKEN=$alice timeout 10 "$BERTH" events -f 2>&1)" ||
  fail "berth events -f should say why it is refused"
kill -9 "${followers[@]}"
back=""
for _ in $(seq 60); do [ "$(follow 1 || true)" = 200 ] && back=1 && break; sleep 0.5; done
[ -n "$back" ] || fail "alice's killed followers still hold her watches"

# Tokens survive nothing but the file: a restart with the same file knows the same users.
kill -TERM "$SERVER"
wait "$SERVER" || fail "the server did not stop cleanly"
SERVER=
start_server --tokens "$TMP/tokens.yaml" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" \
  --vcs "$TMP/vcs.yaml"
[ "$(as "$alice" ps -a -q)" = "$a1" ] || fail "after a restart alice's ps: $(as "$alice" ps -a)"
echo "1 passed, 0 failed"
