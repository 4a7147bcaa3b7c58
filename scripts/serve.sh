#!/usr/bin/env bash
# Local Prefect stack for eventatlas: server on 127.0.0.1, the "eventatlas-process" work pool,
# every deployment (prefect.yaml's, then the generated experiment/<name> and ingest/<name>), one process worker.
#   scripts/serve.sh          start (idempotent: reuses a running server / worker)
#   scripts/serve.sh stop     stop the worker and the server started here
#   scripts/serve.sh status   show what runs
#   scripts/serve.sh --smoke  check what `start` needs (prefect on PATH, every deployment's entrypoint, in
#                             prefect.yaml and generated, names an existing flow function); starts and writes nothing
# Logs and pids live in .prefect/ (git-ignored). Afterwards, in another shell:
#   export PREFECT_API_URL=http://127.0.0.1:${PREFECT_PORT:-4200}/api
#   prefect deployment run 'train-all/default'
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
VENV="${VENV:-$REPO/.venv}"
[ -x "$VENV/bin/prefect" ] && PATH="$VENV/bin:$PATH"
if [ "${1:-}" = "--smoke" ]; then
  command -v prefect >/dev/null || { echo "serve.sh: prefect is not on PATH (activate the venv or set VENV)" >&2; exit 1; }
  python - "$REPO/prefect.yaml" <<'PY'
import ast, pathlib, sys
import yaml
from eventatlas.experiments.deploy import prefect_file
path = pathlib.Path(sys.argv[1])
deps = yaml.safe_load(path.read_text(encoding="utf-8"))["deployments"]
generated = prefect_file()["deployments"]  # built in memory: the smoke run writes nothing
for d in deps + generated:
    file, _, fn = d["entrypoint"].partition(":")
    src = path.parent / file
    names = {n.name for n in ast.walk(ast.parse(src.read_text(encoding="utf-8"))) if isinstance(n, ast.FunctionDef)}
    if fn not in names:
        sys.exit(f"{path}: deployment {d['name']!r}: entrypoint {d['entrypoint']} names no function of {file}")
print(f"serve.sh smoke: prefect found, {len(deps)} + {len(generated)} generated deployments with valid entrypoints")
PY
  exit $?
fi
STATE="$REPO/.prefect"
POOL="eventatlas-process"
mkdir -p "$STATE"
# the port of a server started here is remembered, so `stop`/`status` find it without PREFECT_PORT
if [ -z "${PREFECT_PORT:-}" ] && [ -f "$STATE/port" ] && [ "${1:-start}" != start ]; then PREFECT_PORT="$(cat "$STATE/port")"; fi
PORT="${PREFECT_PORT:-4200}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PREFECT_HOME="${PREFECT_HOME:-$STATE/home}"
export PREFECT_API_URL="http://127.0.0.1:$PORT/api"
# the server streams run logs out over its websocket: without these (Prefect's default: off)
# `prefect deployment run ... --watch` shows state events only, never a log line
export PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED="${PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED:-true}"
export PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED="${PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED:-true}"
export EVENTATLAS_REPO="$REPO"   # resolved by the pull step in prefect.yaml

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_one() {  # stop the process group we started (pid file), politely then firmly
  local pidf="$STATE/$1.pid"
  if alive "$pidf"; then
    local pid; pid="$(cat "$pidf")"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    echo "stopped $1 (pid $pid)"
  fi
  rm -f "$pidf"
}

healthy() {  # python rather than curl: present wherever the venv is
  python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://127.0.0.1:$PORT/api/health" >/dev/null 2>&1
}

case "${1:-start}" in
  stop)
    stop_one worker
    stop_one server
    exit 0 ;;
  status)
    for s in server worker; do
      if alive "$STATE/$s.pid"; then echo "$s: running (pid $(cat "$STATE/$s.pid"), log $STATE/$s.log)"; else echo "$s: stopped"; fi
    done
    healthy && echo "API: $PREFECT_API_URL healthy" || echo "API: $PREFECT_API_URL not answering"
    exit 0 ;;
  start) ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

if alive "$STATE/server.pid" && healthy; then
  echo "server already running (pid $(cat "$STATE/server.pid"))"
else
  if healthy; then
    echo "port $PORT already serves a Prefect API not started here; set PREFECT_PORT to another port" >&2
    exit 1
  fi
  echo "starting prefect server on 127.0.0.1:$PORT (log $STATE/server.log)"
  setsid prefect server start --host 127.0.0.1 --port "$PORT" >"$STATE/server.log" 2>&1 < /dev/null &
  echo $! >"$STATE/server.pid"
  echo "$PORT" >"$STATE/port"
  for i in $(seq 1 120); do
    healthy && break
    alive "$STATE/server.pid" || { echo "server exited; see $STATE/server.log" >&2; tail -20 "$STATE/server.log" >&2; exit 1; }
    sleep 1
  done
  healthy || { echo "server not healthy after 120 s; see $STATE/server.log" >&2; exit 1; }
fi
echo "API healthy at $PREFECT_API_URL"

# `prefect deploy` prints a screenful per deployment (including "start a worker", which this script
# does below): its output goes to a log, the terminal gets one line (or the log's tail on failure)
prefect work-pool inspect "$POOL" >/dev/null 2>&1 || prefect work-pool create "$POOL" --type process >"$STATE/deploy.log" 2>&1
if ! prefect --no-prompt deploy --all >>"$STATE/deploy.log" 2>&1; then
  echo "prefect deploy failed; see $STATE/deploy.log" >&2; tail -20 "$STATE/deploy.log" >&2; exit 1
fi
echo "registered $(grep -c "Deployment '.*' successfully" "$STATE/deploy.log" || true) deployments from prefect.yaml (log $STATE/deploy.log)"
# generated, not kept in prefect.yaml: experiment/<name> from experiments/*.yaml and ingest/<name> from
# datasets/registry.yaml, in one prefect file
GENERATED="$STATE/generated.prefect.yaml"
python -m flows.experiment --prefect-file "$GENERATED" >>"$STATE/deploy.log" 2>&1 \
  && prefect --no-prompt deploy --all --prefect-file "$GENERATED" >>"$STATE/deploy.log" 2>&1 \
  || { echo "generated deployments failed; see $STATE/deploy.log" >&2; tail -20 "$STATE/deploy.log" >&2; exit 1; }
echo "registered $(grep -c '^- name:' "$GENERATED" || true) generated experiment/<name> and ingest/<name> deployments"

if alive "$STATE/worker.pid"; then
  echo "worker already running (pid $(cat "$STATE/worker.pid"))"
else
  echo "starting process worker for $POOL (log $STATE/worker.log)"
  setsid prefect worker start --pool "$POOL" --type process >"$STATE/worker.log" 2>&1 < /dev/null &
  echo $! >"$STATE/worker.pid"
fi
cat <<MSG
ready (the worker is running: nothing else to start). In another shell:
  export PREFECT_API_URL=$PREFECT_API_URL
  prefect deployment run 'train-all/default' --watch     # progress lines stream here and in the UI
UI: http://127.0.0.1:$PORT   stop: make stop-serve (scripts/serve.sh stop)
MSG
