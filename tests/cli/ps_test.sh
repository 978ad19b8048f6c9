#!/usr/bin/env bash
# `berth ps` reads the server's tab-separated job listing (docs/api.md): every job over several
# pages, each once, and names holding tabs, newlines and backslashes shown as submitted.
source "$(dirname "$0")/lib.sh"
start_server

# More than a page (10,000 jobs): the pages join with none lost or repeated.
"$BERTH" bench api --jobs 10050 --clients 8 --json > "$TMP/bench" 2> "$TMP/bench.err" ||
  fail "bench api: $(cat "$TMP/bench" "$TMP/bench.err")"
# The server's memory for them, from its resident memory's growth: some, and not absurd.
jq -e '.server_memory_bytes_per_100k_jobs > 0 and .server_memory_bytes_per_100k_jobs < 1e10' \
  "$TMP/bench" > /dev/null || fail "bench api's memory figure: $(cat "$TMP/bench")"
"$BERTH" ps -a -q > "$TMP/ids"
[ "$(wc -l < "$TMP/ids")" -eq 10050 ] || fail "ps -a -q listed $(wc -l < "$TMP/ids") of 10050 jobs"
[ "$(sort -nu "$TMP/ids" | wc -l)" -eq 10050 ] || fail "ps -a -q listed a job twice"
[ "$(head -1 "$TMP/ids")" = 1 ] && [ "$(tail -1 "$TMP/ids")" = 10050 ] ||
  fail "ps -a -q is not by id from 1 to 10050: $(head -1 "$TMP/ids") .. $(tail -1 "$TMP/ids")"
"$BERTH" ps -a > "$TMP/table"
[ "$(wc -l < "$TMP/table")" -eq 10051 ] || fail "ps -a: $(wc -l < "$TMP/table") lines for 10050 jobs"
head -1 "$TMP/table" | grep -qE '^ID +NAME +QUEUE +USER +STATE +GPUS +AGE +REASON$' ||
  fail "ps header: $(head -1 "$TMP/table")"
bad=$(tail -n +2 "$TMP/table" |
  grep -cvE '^[0-9]+ +job-[0-9]+ +default +- +(pending|scheduled) +(-|dgx-[0-3]/[0-7]) +[0-9]+[smhd] +[a-z]' || true)
[ "$bad" -eq 0 ] || fail "ps -a: $bad malformed rows, e.g. $(tail -n +2 "$TMP/table" | grep -vE '^[0-9]+ +job-' | head -2)"
# Without -a the ended jobs are left out; with --queue only that queue's.
"$BERTH" stop 1 > /dev/null
! "$BERTH" ps -q | grep -qx 1 || fail "ps lists the stopped job 1"
[ "$("$BERTH" ps -q | wc -l)" -eq 10049 ] || fail "ps without -a: $("$BERTH" ps -q | wc -l) jobs"
[ -z "$("$BERTH" ps -q --queue nosuch)" ] || fail "ps --queue nosuch lists jobs"
code=$(curl -s -o "$TMP/live.json" -w '%{http_code}' "http://$BERTH_ADDR/v1/jobs?live=yes")
[ "$code" = 400 ] && grep -q 'live: expected 1 or 0' "$TMP/live.json" ||
  fail "live=yes: $code $(cat "$TMP/live.json")"

# A name with a backslash and spaces (control characters are refused at submission; the
# escaping of tabs and newlines, which reasons may hold, is tested in job_listing_test): shown
# as submitted, the same as the JSON listing's.
name='a\t b\\c'
id=$("$BERTH" run -d --name "$name" busybox true)
row=$("$BERTH" ps | grep -F "$name") || fail "ps lost the name: $("$BERTH" ps | tail -3)"
[[ "$row" == "$id "* ]] || fail "the row of job $id: $row"
[ "$("$BERTH" ps --format json | jq -r --argjson id "$id" '.[] | select(.id == $id) | .name')" = "$name" ] ||
  fail "ps --format json: the name changed"

# Something other than a berth server answering 200: ps says so (exit 1) rather than printing
# an empty table.
mkdir -p "$TMP/www/v1"
printf 'hello garbage\n' > "$TMP/www/v1/jobs"
serve_dir "$TMP/www"
rc=0
out=$(BERTH_ADDR=127.0.0.1:$HTTPD_PORT "$BERTH" ps 2>&1) || rc=$?
kill "$HTTPD"
[ "$rc" -eq 1 ] && grep -q "is it a berth server?" <<<"$out" ||
  fail "ps against a web server that is not berth: exit $rc: $out"
# A server older than `live` (its refusal, served by busybox nc): ps says what works with it.
body='{"error":"unknown parameter \"live\"; known: queue, state, user, limit, after"}'
printf 'HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n\r\n%s' \
  "${#body}" "Connection: close" "$body" > "$TMP/old-answer"
for _ in $(seq 20); do
  port=$((20000 + RANDOM % 40000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue  # taken
  busybox nc -ll -p "$port" -e cat "$TMP/old-answer" &
  NC=$!
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  kill -0 "$NC" 2>/dev/null && break
done
rc=0
out=$(BERTH_ADDR=127.0.0.1:$port "$BERTH" ps 2>&1) || rc=$?
kill "$NC"
[ "$rc" -eq 2 ] && grep -qF 'older than this berth: `berth ps -a` works with it' <<<"$out" ||
  fail "ps against a server older than live: exit $rc: $out"
echo "ps: ok"
