#!/usr/bin/env bash
# The scenarios of examples/scenarios/: each is replayed as its "# run:" line says, and every
# "# check:" line, a jq expression over the run's results (the one policy's object of --json),
# must hold. The helpers below name what the checks read.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || fail "jq is missing: run scripts/install-deps.sh"

HELPERS='
def job($n): first(.outcomes.jobs[] | select(.name == $n));
def usage($q; $t): [.outcomes.queues[$q][] | select(.time <= $t)] | last | .usage_gpus;
def running_at($t):
  [.outcomes.jobs[] | select(any(.runs[]; .start <= $t and (.stop == null or .stop > $t)))];
def racks($n): [job($n).runs[0].replicas[].rack];
'
passed=0 failed=0
for file in examples/scenarios/*.yaml; do
  name=$(basename "$file" .yaml)
  run=$(sed -n 's/^# run: berth //p' "$file")
  [ -n "$run" ] || fail "$file: no '# run: berth ...' line"
  read -ra args <<< "$run"
  if ! "$BERTH" "${args[@]}" --json "$TMP/$name.json" > "$TMP/$name.out" 2>&1; then
    echo "FAIL $name: the replay failed: $(cat "$TMP/$name.out")"
    failed=$((failed + 1))
    continue
  fi
  ok=1
  while IFS= read -r check; do
    jq -e "$HELPERS .policies | to_entries[0].value | $check" "$TMP/$name.json" > /dev/null ||
      { echo "FAIL $name: $check"; ok=0; }
  done < <(sed -n 's/^# check: //p' "$file")
  if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
