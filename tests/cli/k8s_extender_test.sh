#!/usr/bin/env bash
# `berth server --k8s` as kube-scheduler meets it: against the API-server stand-in
# (berth_k8s_apiserver, built beside berth) with a token in a kubeconfig, the extender verbs
# over HTTP, a binding that lands in the API server with the GPUs, metrics that promtool
# accepts, a kill -9 and restart that keeps the GPUs held, and refusals that name the flag.
source "$(dirname "$0")/lib.sh"
APISERVER=$(dirname "$BERTH")/berth_k8s_apiserver
API=
trap '[ -z "$API" ] || kill "$API" 2>/dev/null; stop_server; rm -rf "$TMP"' EXIT
for tool in curl jq promtool; do
  command -v "$tool" > /dev/null || fail "$tool is missing: run scripts/install-deps.sh as root"
done

"$APISERVER" --listen-port 0 --token sekret > "$TMP/api.log" 2>&1 &
API=$!
for _ in $(seq 100); do grep -q 'listening on' "$TMP/api.log" && break; sleep 0.05; done
API_URL=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$TMP/api.log")
[ -n "$API_URL" ] || fail "the stand-in never listened: $(cat "$TMP/api.log")"
kube() { curl -sf -H 'Authorization: Bearer sekret' -H 'Content-Type: application/json' "$@"; }

node() {  # NAME GPUS: a GPU node as GPU feature discovery labels it
  kube -X POST "$API_URL/api/v1/nodes" -d @- > /dev/null <<JSON
{"metadata": {"name": "$1", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
  "nvidia.com/gpu.count": "$2", "nvidia.com/gpu.memory": "81920"}},
 "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "$2"},
  "conditions": [{"type": "Ready", "status": "True"}]}}
JSON
}
pod() {  # NAME GPUS: prints the created pod
  kube -X POST "$API_URL/api/v1/namespaces/ml/pods" -d @- <<JSON
{"metadata": {"name": "$1", "namespace": "ml"},
 "spec": {"schedulerName": "berth", "containers": [{"name": "main", "image": "trainer:1",
   "resources": {"limits": {"nvidia.com/gpu": "$2"}}}]}}
JSON
}
node gpu-a 8
node gpu-b 8

cat > "$TMP/kubeconfig" <<YAML
apiVersion: v1
kind: Config
current-context: test
contexts:
- name: test
  context: {cluster: standin, user: berth}
clusters:
- name: standin
  cluster: {server: "$API_URL"}
users:
- name: berth
  user: {token: sekret}
YAML

start_extender() {
  : > "$TMP/server.log"
  "$BERTH" server --k8s --kubeconfig "$TMP/kubeconfig" --listen 127.0.0.1:0 >> "$TMP/server.log" 2>&1 &
  SERVER=$!
  wait_line "$TMP/server.log" "$SERVER" 'synced with'
  EXT=$(sed -n 's|.*listening on \(http://[^ ]*\)/k8s.*|\1|p' "$TMP/server.log")
  [ -n "$EXT" ] || fail "no listening line: $(cat "$TMP/server.log")"
  curl -sf "$EXT/readyz" > /dev/null || fail "not ready after its first sync"
}
# filter POD_JSON: the node berth passes ("" when none), after berth's watch has seen the pod.
filter() {
  local args answer
  args=$(jq -c '{Pod: ., NodeNames: ["gpu-a", "gpu-b"]}' <<<"$1")
  for _ in $(seq 50); do
    answer=$(curl -sf -X POST "$EXT/k8s/filter" -H 'Content-Type: application/json' -d "$args")
    grep -q 'has not shown this pod' <<<"$answer" || break
    sleep 0.1
  done
  [ "$(jq -r .Error <<<"$answer")" = "" ] || fail "filter error: $answer"
  jq -r '.NodeNames[0] // ""' <<<"$answer"
}
bind() {  # POD_JSON NODE
  local args
  args=$(jq -c --arg node "$2" '{PodName: .metadata.name, PodNamespace: .metadata.namespace,
    PodUID: .metadata.uid, Node: $node}' <<<"$1")
  curl -sf -X POST "$EXT/k8s/bind" -H 'Content-Type: application/json' -d "$args"
}

start_extender
grep -q '2 nodes, 16 GPUs' "$TMP/server.log" || fail "sync line: $(cat "$TMP/server.log")"
p1=$(pod train 4)
n1=$(filter "$p1")
[ -n "$n1" ] || fail "a 4-GPU pod on two empty 8-GPU nodes was not placed"
[ "$(bind "$p1" "$n1" | jq -r .Error)" = "" ] || fail "bind failed"
stored=$(kube "$API_URL/api/v1/namespaces/ml/pods/train")
[ "$(jq -r .spec.nodeName <<<"$stored")" = "$n1" ] || fail "the binding did not land: $stored"
ids=$(jq -r '.metadata.annotations["berth.io/gpu-ids"]' <<<"$stored")
[ "$(tr ',' '\n' <<<"$ids" | wc -l)" -eq 4 ] || fail "4 GPUs expected in berth.io/gpu-ids, got '$ids'"

# Malformed bodies: the Error field with 200 for filter, 400 with Error for prioritize.
answer=$(curl -s -X POST "$EXT/k8s/filter" -d '{"Pod": [1,2' )
[ "$(jq -r .Error <<<"$answer")" != "" ] || fail "garbage filter body: $answer"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$EXT/k8s/prioritize" -d '[]')
[ "$code" = 400 ] || fail "garbage prioritize body answered $code"

# A node object nested 100,000 deep (200 KB): refused, and the server lives on.
deep=$(printf '[%.0s' $(seq 100000))$(printf ']%.0s' $(seq 100000))
printf '{"Pod": %s, "Nodes": {"items": [{"metadata": {"name": "gpu-a"}, "x": %s}]}}' \
  "$(pod shallow 0)" "$deep" > "$TMP/deep.json"
answer=$(curl -s -X POST "$EXT/k8s/filter" -H 'Content-Type: application/json' \
  --data-binary @"$TMP/deep.json")
grep -q 'nests deeper' <<<"$answer" || fail "deep request: $answer"
curl -sf "$EXT/healthz" > /dev/null || fail "the server died on a deep request"

curl -sf "$EXT/metrics" > "$TMP/metrics.txt"
promtool check metrics < "$TMP/metrics.txt" || fail "promtool refused the exposition"
grep -q '^berth_k8s_pods{state="placed"} 1$' "$TMP/metrics.txt" || fail "placed pods: $(grep berth_k8s_pods "$TMP/metrics.txt")"

# kill -9 and restart: the bound pod is adopted where it runs, so an 8-GPU pod can only go to
# the other node.
kill -9 "$SERVER"
wait "$SERVER" 2>/dev/null || true
start_extender
p2=$(pod big 8)
n2=$(filter "$p2")
[ -n "$n2" ] && [ "$n2" != "$n1" ] || fail "after a restart the 8-GPU pod went to '$n2' (train holds 4 GPUs of $n1)"
p3=$(pod bigger 8)
[ -z "$(filter "$p3")" ] || fail "a third 8-GPU pod was placed on 16 GPUs with 12 held"

expect_exit2 "--state: not used with --k8s" server --k8s --kubeconfig "$TMP/kubeconfig" --state "$TMP/x"
expect_exit2 "--kubeconfig: only with --k8s" server --kubeconfig "$TMP/kubeconfig"
printf 'current-context: nowhere\n' > "$TMP/bad-kubeconfig"
expect_exit2 "contexts" server --k8s --kubeconfig "$TMP/bad-kubeconfig"
echo "k8s extender: ok"
