#!/usr/bin/env bash
# Tries the deployment guide's compose layout on this host: builds the node image, brings up
# compose.yaml (control, a GPU node with serving, two rollout nodes: 15 containers, one process
# each, no shared data), imports two bundled tasks, runs a short training run through the layout's
# gateway with the ordinary CLI, stops rollout node b in the middle of the last step (as a host
# that dies), shows the run complete and which rollout node ran what, and takes it all down again.
#   infra/compose/trial.sh [--keep]     --keep leaves the layout up (take it down: trial.sh --down)
# Its host ports are BRIDLE_PORT_BASE (18700: gateway, +1 serving, +2 tasks), BRIDLE_TEMPORAL_PORT
# (17233) and BRIDLE_TEMPORAL_UI_PORT (18233), away from the embedded stack's. It takes the whole
# machine for about 20 minutes on 2 cores; nothing else should run beside it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export BRIDLE_PORT_BASE="${BRIDLE_PORT_BASE:-18700}"
export BRIDLE_TEMPORAL_PORT="${BRIDLE_TEMPORAL_PORT:-17233}"
export BRIDLE_TEMPORAL_UI_PORT="${BRIDLE_TEMPORAL_UI_PORT:-18233}"
home="${BRIDLE_HOME:-$root/.bridle}"
export CONTAINERS_CONF="$home/containers/containers.conf"
export CONTAINERS_STORAGE_CONF="$home/containers/storage.conf"
project="bridle-trial"
steps=2
tasks=(build-notes-file repair-greeting-typo)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
compose() { podman-compose -p "$project" -f "$root/infra/compose/compose.yaml" "$@"; }
bridle() { node --import tsx "$root/infra/cli/src/main.ts" "$@"; }

bash "$root/infra/bootstrap.sh"
if ! command -v podman-compose >/dev/null; then
  say "installing podman-compose from Debian's packages"
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq podman-compose >/dev/null
fi
BRIDLE_NODE_IMAGE="$(bash "$root/infra/compose/node-image.sh")"
export BRIDLE_NODE_IMAGE
eval "$(bridle compose env)"

if [[ "${1:-}" == "--down" ]]; then
  compose down -v >/dev/null 2>&1
  exit 0
fi
keep=false
[[ "${1:-}" == "--keep" ]] && keep=true
if ! $keep; then trap 'say "taking the layout down"; compose down -v >/dev/null 2>&1 || true' EXIT; fi

say "bringing up the layout ($BRIDLE_NODE_IMAGE)"
started=$SECONDS
compose down -v >/dev/null 2>&1 || true
compose up -d >/dev/null 2>&1

# Ready when the gateway answers, serving sees the model server up, and all three kinds of worker poll.
wait_for() { # what, seconds, command...
  local what="$1" limit="$2"; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo "the layout did not get ready: $what within ${limit}s; containers:" >&2
      podman ps -a --filter "label=io.podman.compose.project=$project" --format '{{.Names}} {{.Status}}' >&2
      exit 1
    fi
    sleep 3
  done
}
wait_for "gateway" 300 curl -fsS "http://127.0.0.1:$BRIDLE_GATEWAY_PORT/healthz"
wait_for "model server behind serving" 600 \
  sh -c "curl -fsS http://127.0.0.1:$BRIDLE_SERVING_PORT/v1/nodes | grep -q '\"state\":\"up\"'"
for queue in control rollout training; do
  wait_for "a worker on the $queue queue" 300 sh -c \
    "'$home/venv/bin/temporal' task-queue describe --task-queue bridle-$queue --namespace bridle \
       --address 127.0.0.1:$BRIDLE_TEMPORAL_PORT --output json | grep -q identity"
done
say "the layout is up after $((SECONDS - started)) s: $(podman ps --filter "label=io.podman.compose.project=$project" -q | wc -l) containers"

for task in "${tasks[@]}"; do bridle tasks import "$root/tasks/$task"; done

name="compose-trial-$(date +%Y%m%d%H%M%S)"
say "training run $name: $steps steps of 2 tasks x 2 rollouts, rollouts on nodes a and b"
run_started=$SECONDS
bridle train --name "$name" --steps "$steps" --batch 2 --group 2 --tasks "$(IFS=,; echo "${tasks[*]}")"
bridle train --name "$name" --follow &
follow=$!

# Node b dies in the middle of the last step, with a rollout in hand: its runner, guard and worker
# stop at once, as when a host goes away. Temporal gives its rollout to node a once the heartbeats
# stop; the run must still complete with every rollout counted once.
runner_log() { podman logs "${project}_$1-runner_1" 2>&1; }
count() { runner_log "$1" | grep -c "\"msg\":\"rollout $2\"" || true; }
per_step=4
killed=false
deadline=$((SECONDS + 1800))
while kill -0 "$follow" 2>/dev/null && ((SECONDS < deadline)); do
  done_all=$(($(count a finished) + $(count b finished)))
  if ((done_all >= (steps - 1) * per_step)) && (($(count b started) > $(count b finished))); then
    say "stopping rollout node b (runner, guard, worker) with a rollout in hand"
    podman stop -t 0 "${project}_b-runner_1" "${project}_b-guard_1" "${project}_b-worker_1" >/dev/null
    killed=true
    break
  fi
  sleep 2
done
$killed || say "node b held no rollout in the last step; nothing was stopped"
wait "$follow"
say "the run took $((SECONDS - run_started)) s"

# Each rollout node's share, from its runner's own log; a rollout node b lost ran again on node a.
for node in a b; do echo "rollout node $node: $(count "$node" finished) rollouts finished, $(count "$node" started) started"; done
bridle runs
