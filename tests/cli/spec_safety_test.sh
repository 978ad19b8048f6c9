#!/usr/bin/env bash
# What a job spec may ask of the host, end to end through a real server and the berth binary:
# volumes only from under the directories the admin allowed (--allow-mount),
# checked again after a restart; /dev/shm's size; and the fields berth never grants
# (privileged, the host's namespaces, devices, capabilities) refused by name and line. Every
# refusal exits 2 and keeps nothing.
source "$(dirname "$0")/lib.sh"

# A prefix that cannot be one is refused before the server starts.
expect_exit2 '--allow-mount "data": the path is not absolute; give the full path, from /' \
  server --state "$TMP/s" --allow-mount data
expect_exit2 '--allow-mount "/data/../etc": the path has a ".." component' \
  server --state "$TMP/s" --allow-mount /data/../etc
expect_exit2 '--allow-mount /: would let jobs mount every host path' \
  server --state "$TMP/s" --allow-mount //

start_server --allow-mount /data --allow-mount /scratch/

# One value per -v: the image after it stays the image.
id=$("$BERTH" run -d -v /data/x:/x:ro -v /scratch//tmp/:/tmp --shm-size 1g --gpus 1 trainer:1 \
  python train.py)
wait_state "$id" scheduled
spec=$("$BERTH" inspect "$id" | jq -c '.spec | fromjson | [.image, .volumes, .shmSize]')
[ "$spec" = '["trainer:1",["/data/x:/x:ro","/scratch//tmp/:/tmp"],"1g"]' ] ||
  fail "run -v/--shm-size: $spec"

expect_exit2 'volumes: "/etc:/etc": the host path /etc is not under a directory this server allows (--allow-mount): /data, /scratch; mount from under one of them, or ask the admin to allow it' \
  run -d -v /etc:/etc trainer:1
expect_exit2 'the host path /database is not under a directory this server allows' \
  run -d -v /database:/db trainer:1
expect_exit2 'volumes[0]: the host path is not absolute; give the full path, from /' \
  run -d -v data:/x trainer:1
expect_exit2 'volumes[0]: the host path has a ".." component' run -d -v /data/../etc:/x trainer:1
expect_exit2 'volumes[0]: expected HOST:CONTAINER, HOST:CONTAINER:ro or HOST:CONTAINER:rw' \
  run -d -v /data/x trainer:1
expect_exit2 'shmSize: expected a size such as 64m or 1g' run -d --shm-size lots trainer:1

printf 'gpus: 1\nimage: trainer:1\nprivileged: true\n' > "$TMP/privileged.yaml"
expect_exit2 "$TMP/privileged.yaml:3:1: privileged: berth does not run privileged containers; GPUs come from the job's gpus" \
  run -d -f "$TMP/privileged.yaml"
printf 'groups:\n  - gpus: 1\n    hostNetwork: true\n' > "$TMP/network.yaml"
expect_exit2 "$TMP/network.yaml:3:5: "'groups[0].hostNetwork: each container has a network namespace of its own; berth never grants the host'"'"'s' \
  run -d -f "$TMP/network.yaml"
printf '{"gpus": 1,\n "devices": ["/dev/nvidia0"]}\n' > "$TMP/devices.json"
expect_exit2 "$TMP/devices.json:2:2: devices: berth grants no devices" run -d -f "$TMP/devices.json"
[ "$("$BERTH" ps -a -q)" = "$id" ] || fail "a refused job was kept: $("$BERTH" ps -a)"

# A restart with a narrower list fails the job whose volume it no longer allows, with the reason.
kill -TERM "$SERVER"
wait "$SERVER" || fail "the server did not stop cleanly"
SERVER=
start_server --allow-mount /scratch
[ "$("$BERTH" inspect "$id" | jq -r .state)" = failed ] || fail "after the restart: $("$BERTH" inspect "$id")"
"$BERTH" inspect "$id" | jq -r .reason | grep -qF 'after a restart its spec no longer suits this server'"'"'s cluster, queues, policy or allowed mounts: volumes: "/data/x:/x:ro": the host path /data/x is not under a directory this server allows (--allow-mount): /scratch' ||
  fail "the reason: $("$BERTH" inspect "$id" | jq -r .reason)"
echo "1 passed, 0 failed"
