#!/usr/bin/env bash
# Installs, builds and runs every test: the end-to-end tests (CLI, a real dockerd, the device
# plugin over gRPC) on the normal build, the unit tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, then every fuzz target: its regression inputs, and 12 s of fresh
# fuzzing (scripts/fuzz.sh; run it longer by hand). The unit tests run once, sanitized: a second,
# unsanitized build of them would cost CI minutes for little the sanitized run misses
# (`ctest --test-dir build` still runs them on a developer's normal build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" --target berth berth_k8s_apiserver berth_docker_tests berth_fake_nvml \
  berth_device_plugin_tests
ctest --test-dir build --output-on-failure -j "$jobs" -L '^(cli|docker|k8s)$'
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBERTH_SANITIZE=ON >/dev/null
# Only what the sanitized run tests: the unit tests (the CLI tests run on the normal build).
cmake --build build-asan -j "$jobs" --target berth_unit_tests
# A sanitized process takes about a second to start (a 300 MB binary), so rather than one process
# per test (ctest) the unit tests run as one gtest shard per core; a failing shard's log is shown.
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
pids=()
for ((shard = 0; shard < jobs; shard++)); do
  (cd build-asan && GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard timeout 1800 \
    ./berth_unit_tests --gtest_brief=1 > "shard-$shard.log" 2>&1) &
  pids+=($!)
done
failed=0
for ((shard = 0; shard < jobs; shard++)); do
  if wait "${pids[shard]}"; then
    echo "sanitized unit tests, shard $((shard + 1))/$jobs: $(grep -E '^\[  PASSED  \]' "build-asan/shard-$shard.log")"
  else
    failed=1
    echo "sanitized unit tests, shard $((shard + 1))/$jobs FAILED:"
    cat "build-asan/shard-$shard.log"
  fi
done
[ "$failed" = 0 ]
bash scripts/fuzz.sh
