#!/usr/bin/env bash
# Installs, builds and runs every test: the normal build, then the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then every fuzz target: its regression inputs,
# and 15 s of fresh fuzzing (scripts/fuzz.sh; run it longer by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBERTH_SANITIZE=ON >/dev/null
# Only what the sanitized run tests: the unit tests (the CLI tests run on the normal build).
cmake --build build-asan -j "$jobs" --target berth_unit_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -L unit
bash scripts/fuzz.sh
