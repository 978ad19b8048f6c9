#!/usr/bin/env bash
# Runs the Docker client's tests (BINARY, berth_docker_tests) against a private dockerd with
# the busybox image berth-test:1, and always stops the engine again.
#   bash tests/docker/run_docker_tests.sh build/berth_docker_tests [gtest flags...]
set -euo pipefail
binary=$(realpath "$1")
shift
source "$(dirname "$0")/dockerd.sh"
trap stop_dockerd EXIT
start_dockerd "$(mktemp -d /tmp/berth-dockerd.XXXXXX)"
build_test_image berth-test:1
BERTH_DOCKER_SOCK=$DOCKER_SOCK BERTH_TEST_IMAGE=berth-test:1 "$binary" "$@"
