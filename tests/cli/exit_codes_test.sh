#!/usr/bin/env bash
# Every refusal of a command-line value exits 2, as an input error in a file does (main.cc):
# CLI11's own codes (104 conversion, 105 validation, 109 extras, 114 a missing value) are not
# the interface. Help still exits 0.
source "$(dirname "$0")/lib.sh"

expect_exit2 "--candidates: Value -1 not in range" sim packing --candidates -1
expect_exit2 "--jobs: Value 0 not in range" sim replay --jobs 0
expect_exit2 "--jobs: Value abc is not an integer" sim replay --jobs abc
# An empty path would read as "not given" and silently run on the default.
expect_exit2 "--cluster: an empty path" sim replay --jobs 5 --cluster ""
expect_exit2 "--vcs: an empty path" cells --vcs ""
expect_exit2 "--pods: an empty path" sim packing --pods ""
expect_exit2 "--variant: \"multigpu30\": no draw" sim packing --variant multigpu30
expect_exit2 "--jobs" sim replay --jobs
expect_exit2 "--load: Value x is not a decimal number" sim replay --load x
expect_exit2 "--nope" sim replay --nope
expect_exit2 "--iterations: Value 0 not in range" bench alloc --iterations 0
expect_exit2 "--iterations: Value 0x10 is not an integer" bench alloc --iterations 0x10
expect_exit2 "--pending: Value  7 is not an integer" bench schedule --pending " 7"
expect_exit2 "A subcommand is required" sim
# --version needs no subcommand, and exits 0.
[[ "$("$BERTH" --version)" =~ ^berth\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "berth --version printed '$("$BERTH" --version)'"
expect_exit2 "--format" sim replay --format nope
expect_exit2 "--tune: expected a factor from 0.01 to 3, got 1e-300" sim packing --tune 1e-300
# The value as given, not rounded to 6 digits ("got 3" for 3.0000001).
expect_exit2 "--tune: expected a factor from 0.01 to 3, got 3.0000001" sim packing --tune 3.0000001
expect_exit2 "--checkpoint: expected seconds above 0 and at most 1000000000, got 1000000000.5" \
  sim replay --jobs 5 --checkpoint 1000000000.5
# Decimal numbers only: CLI11's conversion took hexadecimal ones.
for v in 0x10 0x1p-1 " 1" "1 " ""; do
  expect_exit2 "--load: Value $v is not a decimal number" sim replay --jobs 5 --load "$v"
  expect_exit2 "--checkpoint: Value $v is not a decimal number" sim replay --jobs 5 --checkpoint "$v"
  expect_exit2 "--tune: Value $v is not a decimal number" sim packing --tune "$v"
done
# A lower seconds bound lowers the default checkpoint interval with it: no refusal of a
# --checkpoint never given.
"$BERTH" --limit seconds=1 sim replay --jobs 5 > "$TMP/out" 2>&1 || fail "--limit seconds=1: $(cat "$TMP/out")"
# CLI11's refusals read like berth's own.
out=$("$BERTH" cells --bogus 2>&1) || true
[ "${out#berth: }" != "$out" ] || fail "a CLI11 refusal without the berth: prefix: $out"

# --seed: decimal digits from 0 to 2^64-1, nothing CLI11's conversion would bend into one.
for seed in -1 18446744073709551616 99999999999999999999999999 0x10 " 7" "7 " 1.5 ""; do
  expect_exit2 "--seed: Value \"$seed\" is not a seed" sim replay --jobs 5 --seed "$seed"
done
for seed in 0 18446744073709551615; do
  "$BERTH" sim replay --jobs 5 --seed "$seed" > "$TMP/out" || fail "--seed $seed refused"
done

"$BERTH" sim replay --help > "$TMP/help" || fail "--help exits non-zero"
grep -qF -- "--seed" "$TMP/help" || fail "--help prints the options"
echo "1 passed, 0 failed"
