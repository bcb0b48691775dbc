# Shared by the agent end-to-end scripts: a scripted model endpoint (d2k-scripted-server, real HTTP on
# loopback) and d2k agent runs against it. SCRIPTED_SERVER comes from ctest (tests/CMakeLists.txt).
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
: "${SCRIPTED_SERVER:?}"
AGENT_PY=(python3 "$D2K_ROOT/tests/e2e/agent_script.py")
# Two small published workloads keep the checks quick; the final evaluation still runs every workload.
AGENT_OPTS=(--task moe/topk_softmax --device cpu -w qwen3-30b-T1 -w mixtral-8x7b-T4096 --seed 7 --no-baseline
            --max-seconds 0.02 --min-samples 2 --warmup 0 --timeout 60)

# start_server NAME PROVIDER KIND [SKIP]: plays the script of KIND from step SKIP (serve, below).
start_server() {
  local name=$1 provider=$2 kind=$3 skip=${4:-0}
  "${AGENT_PY[@]}" script "$provider" "$D2K_ROOT" "$kind" "$skip" > "$WORK/$name.script.json"
  serve_script "$name" "$provider"
}

# serve_script NAME PROVIDER [MODEL]: plays $WORK/NAME.script.json; sets SERVER_PID and writes $WORK/NAME.toml,
# the models file that names it MODEL (default scripted). Requests go to $WORK/NAME.requests.jsonl.
serve_script() {
  local name=$1 provider=$2 model=${3:-scripted}
  rm -f "$WORK/$name.port"
  "$SCRIPTED_SERVER" "$WORK/$name.script.json" "$WORK/$name.requests.jsonl" > "$WORK/$name.port" 2> "$WORK/$name.server.err" &
  SERVER_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/$name.port" ] && break; sleep 0.05; done
  [ -s "$WORK/$name.port" ] || { echo "FAIL: the scripted server did not start" >&2; cat "$WORK/$name.server.err" >&2; exit 1; }
  "${AGENT_PY[@]}" models "$provider" "$(head -1 "$WORK/$name.port")" "$model" > "$WORK/$name.toml"
}

# stop_server: ends the server (if it has not ended by itself) and fails if any request failed its step.
stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  local rc=0
  wait "$SERVER_PID" || rc=$?
  if [ "$rc" != 0 ]; then echo "FAIL: the scripted server reports failed requests:" >&2; cat "$WORK"/*.server.err >&2; exit 1; fi
}

# the_run RUNS_DIR: the one run folder in RUNS_DIR.
the_run() {
  local runs=("$1"/*)
  [ "${#runs[@]}" = 1 ] || { echo "FAIL: expected one run folder in $1, found ${#runs[@]}" >&2; exit 1; }
  echo "${runs[0]}"
}

final_field() { "${AGENT_PY[@]}" final "$1" "$2"; }
