#!/usr/bin/env bash
# --policy takes a policy file: the example runs under its own name next to a built-in policy; a
# bad file is refused with every problem at its file and line; an unknown name says what is known.
source "$(dirname "$0")/lib.sh"

"$BERTH" sim replay --cluster examples/multi-rack.yaml --format synthetic --jobs 40 \
  --policy berth,examples/policy.yaml --json "$TMP/r.json" > /dev/null
[ "$(json_get "$TMP/r.json" '.policies | keys | join(",")')" = "berth,training-first" ] ||
  fail "the policy file runs under its name"

cat > "$TMP/bad.yaml" <<'YAML'
name: bad
scores:
  - {name: fgd, weight: 0}
  - {name: tetris}
reclaimHysteresis: 1.5
YAML
run() { "$BERTH" sim replay --cluster examples/multi-rack.yaml --format synthetic --jobs 5 --policy "$@"; }
expect_error "bad.yaml:3:25: scores[0].weight: must be > 0" run "$TMP/bad.yaml"
expect_error "bad.yaml:4:5: scores[1]" run "$TMP/bad.yaml"
expect_error "bad.yaml:5:20: reclaimHysteresis" run "$TMP/bad.yaml"
expect_error "missing.yaml: cannot read" run "$TMP/missing.yaml"
expect_error 'unknown policy "tetris"; built-in policies: berth' run tetris
echo "1 passed, 0 failed"
