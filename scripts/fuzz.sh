#!/usr/bin/env bash
# Builds berth's fuzz targets (fuzz/: libFuzzer with ASan and UBSan, clang) in build-fuzz/ and
# runs them: first every regression input kept in tests/data/fuzz/TARGET/, then fresh fuzzing
# from seeds taken from examples/ and data/ and from those regression inputs (read-only).
#
#   scripts/fuzz.sh                    every target for 12 s, one per core (scripts/test.sh)
#   scripts/fuzz.sh TARGET [SECONDS]   one target (cluster_file, openb_pod_list, ...) for longer
#   scripts/fuzz.sh T1,T2 SECONDS      those targets, one per core
#   scripts/fuzz.sh all SECONDS        every target for SECONDS each
#
# A crash, a sanitizer report, an input slower than 10 s or one that takes more than 2 GiB stops
# the run with the input saved under build-fuzz/findings/; once the bug is fixed, copy the input
# to tests/data/fuzz/TARGET/ so that every test run replays it. The corpus each run grows is kept
# in build-fuzz/corpus/TARGET/, so longer runs pick up where the last one stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
# 12 s each keeps the test run's fuzzing stage near where it was with fewer targets, and the
# whole test run under 30 minutes on 2 cores.
seconds=${2:-12}
limits=(-rss_limit_mb=2048 -timeout=30 -dict=fuzz/berth.dict)

cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DBERTH_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)"

# The inputs of the targets that read a tree (InputTree in fuzz/fuzz_input.h): "== PATH" lines,
# each followed by its file. entry PATH FILE: one file; tree PREFIX DIR: every file under DIR.
entry() {
  printf '== %s\n' "$1"
  cat "$2"
  [ -z "$(tail -c 1 "$2")" ] || echo
}
tree() {
  local f
  find "$2" -type f | sort | while read -r f; do entry "${1:+$1/}${f#"$2"/}" "$f"; done
}

# seeds TARGET DIR: fills DIR with valid inputs of the target's format. Traces are cut to their
# first rows: the fuzzer mutates small inputs much faster, and the rows are all alike.
seeds() {
  local dir=$2 f
  case $1 in
    cluster_file) cp examples/scenarios/clusters/*.yaml "$dir"
      for f in examples/*.yaml; do
        case $f in */vcs.yaml | */policy.yaml) ;; *) cp "$f" "$dir" ;; esac
      done ;;
    vc_file) cp examples/vcs.yaml "$dir" ;;
    policy_file) cp examples/policy.yaml "$dir" ;;
    berth_trace) cp examples/scenarios/*.yaml "$dir" ;;
    openb_node_list | openb_pod_list)
      for f in data/openb/"$1"_*.csv; do head -n 40 "$f" > "$dir/$(basename "$f")"; done ;;
    tiresias_cluster) for f in data/tiresias/*.csv; do
        [ "$f" = data/tiresias/60_job.csv ] || cp "$f" "$dir"
      done ;;
    tiresias_jobs) cp data/tiresias/60_job.csv "$dir" ;;
    # Inputs that exist only here: job specs of every field, a tokens file of each kind,
    # one message of each kind the agent protocol has, kubeconfigs of each kind of user, and
    # extender sessions (nodes, pods, then the verbs; fuzz/k8s_extender_fuzz.cc).
    job_spec | tokens_file | agent_protocol | kubeconfig | k8s_extender)
      cp fuzz/seeds/"$1"/* "$dir" ;;
    dcgm_metrics) cp tests/data/agent/dcgm/metrics.txt "$dir" ;;
    cgroup_stats)
      tree "" tests/data/agent/cgroup-v1 > "$dir/v1"
      { tree "" tests/data/agent/cgroup-v2; entry net/dev tests/data/agent/net-dev.txt; } > "$dir/v2" ;;
    # Each host's nvidia-smi outputs (a PCIe host's matrix where it has none), with a /sys tree
    # of two sockets (70 files) for two of them and of one NUMA node for the others.
    gpu_discovery)
      local host sys
      for host in tests/data/agent/*/; do
        host=${host%/}
        [ -f "$host/query.csv" ] || continue
        { entry query "$host/query.csv"
          entry list "$( [ -f "$host/list.txt" ] && echo "$host/list.txt" || echo /dev/null)"
          case $host in
            */dgx-a100-mig) entry topo tests/data/agent/dgx-a100/topo.txt ;;
            *) entry topo "$( [ -f "$host/topo.txt" ] && echo "$host/topo.txt" ||
                 echo tests/data/agent/pcie-l40s/topo.txt)" ;;
          esac
          case $host in
            */dgx-a100 | */pcie-l40s) sys=tests/data/agent/sys-2socket ;;
            *) sys=tests/data/agent/sys-flat ;;
          esac
          tree sys "$sys"; } > "$dir/$(basename "$host")"
      done ;;
    *) echo "fuzz: no seeds for target $1" >&2; return 1 ;;
  esac
}

run() {
  local target=$1 bin=build-fuzz/$1_fuzz log=build-fuzz/logs/$1.log
  local regressions=tests/data/fuzz/$1 corpus=build-fuzz/corpus/$1 seed_dir=build-fuzz/seeds/$1
  mkdir -p build-fuzz/logs build-fuzz/findings "$corpus"
  rm -rf "$seed_dir" && mkdir -p "$seed_dir"
  seeds "$target" "$seed_dir" || return 1
  # The inputs that found bugs: each is run once and must pass.
  if compgen -G "$regressions/*" >/dev/null; then
    "$bin" "${limits[@]}" "$regressions"/* >"$log" 2>&1 ||
      { tail -n 40 "$log"; echo "fuzz $target: a regression input of $regressions fails"; return 1; }
  fi
  # libFuzzer writes new inputs to the first corpus directory only: the regression inputs come
  # after it, read-only, so that the fuzzing starts from them too.
  local -a dirs=("$corpus" "$seed_dir")
  [ -d "$regressions" ] && dirs+=("$regressions")
  if ! "$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="build-fuzz/findings/$target-" "${dirs[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz $target: FAILED; the input is in build-fuzz/findings/ (log: $log)"
    return 1
  fi
  printf 'fuzz %-17s %9s runs in %ss, %s regression inputs, corpus %s\n' "$target" \
    "$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")" "$seconds" \
    "$(find "$regressions" -type f 2>/dev/null | wc -l)" "$(find "$corpus" -type f | wc -l)"
}

if [ "$which" = all ]; then
  targets=()
  for source in fuzz/*_fuzz.cc; do targets+=("$(basename "$source" _fuzz.cc)"); done
else
  IFS=, read -ra targets <<<"$which"
fi
# One target per core at a time: each fuzzer is single-threaded.
failed=0 running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run "$target" &
  running=$((running + 1))
done
for _ in $(seq "$running"); do wait -n || failed=1; done
exit "$failed"
