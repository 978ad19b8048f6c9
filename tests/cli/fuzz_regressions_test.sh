#!/usr/bin/env bash
# The inputs that found bugs in the parsers (tests/data/fuzz/TARGET/, replayed by scripts/fuzz.sh
# under the sanitizers) are each refused by the berth binary too: exit 1 or 2 with an error that
# names the file and its line; no crash, no hang, no runaway memory.
source "$(dirname "$0")/lib.sh"

# check TARGET FILE: runs the berth command that reads FILE as TARGET reads it.
check() {
  local target=$1 file=$2 out rc=0
  local -a cmd
  case $target in
    cluster_file | openb_node_list | tiresias_cluster) cmd=(cells --cluster "$file") ;;
    vc_file) cmd=(cells --cluster examples/multi-rack.yaml --vcs "$file") ;;
    policy_file) cmd=(sim replay --cluster examples/multi-rack.yaml --format synthetic --jobs 5
      --policy "$file") ;;
    berth_trace) cmd=(sim replay --cluster examples/scenarios/clusters/dgx-4.yaml --format berth
      --trace "$file") ;;
    openb_pod_list) cmd=(sim replay --format openb --jobs 20 --trace "$file") ;;
    tiresias_jobs) cmd=(sim replay --format tiresias --jobs 20 --trace "$file") ;;
    kubeconfig) cmd=(server --k8s --kubeconfig "$file" --listen 127.0.0.1:0) ;;
    *) fail "$file: no berth command for fuzz target $target" ;;
  esac
  out=$( (ulimit -v 6000000; timeout 20 "$BERTH" "${cmd[@]}") 2>&1) || rc=$?
  case $rc in
    1 | 2) ;;
    0) fail "accepted (exit 0): berth ${cmd[*]}" ;;
    124) fail "timed out after 20 s: berth ${cmd[*]}" ;;
    *) fail "exit $rc (crash or out of memory): berth ${cmd[*]}: $(tail -c 400 <<<"$out")" ;;
  esac
  # The error names the file and a line: "FILE:LINE:" (or "FILE:LINE:COLUMN:").
  grep -qF -- "$file:" <<<"$out" || fail "the error does not name $file: $out"
  grep -qE -- "$(sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$file"):[0-9]+:" <<<"$out" ||
    fail "the error does not name a line of $file: $out"
  count=$((count + 1))
}

count=0
for dir in tests/data/fuzz/*/; do
  target=$(basename "$dir")
  [ -f "fuzz/${target}_fuzz.cc" ] || fail "$dir: no fuzz target fuzz/${target}_fuzz.cc"
  # What a node agent reads and sends (nvidia-smi, /sys, cgroupfs, DCGM, protocol messages) no
  # berth command reads from a file: scripts/fuzz.sh and the unit tests replay those inputs.
  # Nor the extender's sessions (nodes, pods and verbs): only scripts/fuzz.sh replays those.
  case $target in
    agent_protocol | cgroup_stats | dcgm_metrics | gpu_discovery | k8s_extender) continue ;;
  esac
  for file in "$dir"*; do
    [ -f "$file" ] && check "$target" "$file"
  done
done
[ "$count" -gt 0 ] || fail "no regression inputs in tests/data/fuzz/"
echo "1 passed, 0 failed ($count regression inputs refused)"
