#!/usr/bin/env bash
# Installs, builds, and runs berth's main job on its embedded default cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
# The main job on the bundled openb trace: the FGD paper's packing protocol, three policies
# side by side on one seed, with the allocation curves drawn to build/packing.svg.
./build/berth sim packing --policy bestfit,fgd,berth --seeds 42 --svg build/packing.svg
echo "allocation curves: build/packing.svg"
