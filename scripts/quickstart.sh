#!/usr/bin/env bash
# Installs, builds, and runs berth's main job on its embedded default cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
./build/berth cells
