#!/usr/bin/env bash
# Installs what berth needs to build and test on Debian 12 (run as root). Safe to re-run.
set -euo pipefail
# jq: the cli tests read the JSON results with it. clang and libfuzzer-14-dev: the fuzz targets
# (scripts/fuzz.sh).
# libsqlite3-dev and libcpp-httplib-dev (with pkg-config): the server's state and API; libssl-dev
# its TLS and token hashes, and openssl the tests' self-signed certificates.
# prometheus (promtool) and curl: tests/cli/metrics_test.sh checks GET /metrics with
# `promtool check metrics` and scrapes it with a real Prometheus, read back over its HTTP API.
# libcurl4-openssl-dev: the agent's Docker client speaks HTTP over the engine's unix socket with
# it. docker.io and busybox-static: the Docker tests run a private dockerd and a busybox image
# made without a registry (tests/docker/dockerd.sh).
# protobuf-compiler(-grpc), libgrpc++-dev, libprotobuf-dev: berth device-plugin's gRPC to kubelet.
pkgs=(cmake ninja-build g++ pkg-config jq libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev clang libfuzzer-14-dev libsqlite3-dev
      libcpp-httplib-dev libssl-dev openssl prometheus curl libcurl4-openssl-dev docker.io
      busybox-static protobuf-compiler protobuf-compiler-grpc libgrpc++-dev libprotobuf-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi
