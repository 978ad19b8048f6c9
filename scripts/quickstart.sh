#!/usr/bin/env bash
# Installs, builds, runs berth's packing simulator on its embedded default (the bundled openb
# trace), then runs berth itself on this machine in the foreground: `berth up`, the server and
# this node's agent in one process, jobs as Docker containers (GPUs simulated when the machine
# has none). Stop it with Ctrl-C; jobs and state stay under ~/.local/share/berth.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target berth  # the tests build in scripts/test.sh
# The FGD paper's packing protocol, three policies side by side on one seed, with the
# allocation curves drawn to build/packing.svg.
./build/berth sim packing --policy bestfit,fgd,berth --seeds 42 --svg build/packing.svg
echo "allocation curves: build/packing.svg"

# A Docker engine for the jobs: the machine's own, or one started here.
if ! docker version > /dev/null 2>&1; then
  echo "starting dockerd (log: /var/log/berth-quickstart-dockerd.log)"
  dockerd > /var/log/berth-quickstart-dockerd.log 2>&1 &
  for _ in $(seq 300); do docker version > /dev/null 2>&1 && break; sleep 0.1; done
fi
# A demo image that needs no registry.
docker image inspect berth-demo:1 > /dev/null 2>&1 || bash scripts/busybox-image.sh berth-demo:1
echo "demo image: berth-demo:1; try: ./build/berth run --gpus 2 berth-demo:1 sh -c 'echo \$CUDA_VISIBLE_DEVICES'"
exec ./build/berth up
