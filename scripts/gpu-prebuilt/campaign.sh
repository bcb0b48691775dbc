#!/usr/bin/env bash
# A small real-GPU campaign (issue 16): the scripted models of the CI campaign (tests/campaign/policy_model.py)
# with POLICY_DEVICE=cuda: "expert" submits each task's cuda expert, "weak" fails under none and submits
# the expert run twice per call under L1. 2 models x 3 tasks x (none, L1) = 12 runs on the cuda device,
# then `d2k report` (terminal, JSON, HTML) and tools/device_holds.py's reading of the device lock's
# journal into $OUT/campaign-$NAME.tgz. carry [".gpu"].
#   BUDGET=400          seconds for the campaign run; the report follows
#   RUNS=1              agent runs at once on the one GPU (concurrency.runs and per_endpoint)
#   TASKS, CONDITIONS   TOML lists' contents (default the three tasks above, "none", "L1")
#   NAME=h200-scripted  the campaign's name (the folder /tmp/gpu-campaign-$NAME)
set -u
source .gpu/env.sh
NAME=${NAME:-h200-scripted}
TASKS=${TASKS:-'"act/silu_and_mul", "moe/topk_softmax", "moe/sum_reduce"'}
CONDITIONS=${CONDITIONS:-'"none", "L1"'}
WORK=/tmp/gpu-campaign-$NAME; rm -rf $WORK; mkdir -p $WORK
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $WORK/gpu.txt
PY=python3
export POLICY_DEVICE=cuda
source tests/e2e/policy_models.bash
SERVER_PID=""
trap '[ -z "$SERVER_PID" ] || kill $SERVER_PID 2>/dev/null || true; tar czf $OUT/campaign-$NAME.tgz -C $WORK --exclude=campaign/runs . 2>/dev/null' EXIT
policy_models_start
cat > "$WORK/plan.toml" <<TOML
[campaign]
name = "$NAME"
seed = 1
models_file = "models.toml"
models = ["expert", "weak"]
tasks = [$TASKS]
conditions = [$CONDITIONS]
repeats = 1
device = "cuda"
language = "cuda"   # the scripted models submit the CUDA experts (triton is the cuda device's default)

[budget]
turns = 8
max_tokens_total = 400000

[concurrency]
runs = ${RUNS:-1}
per_endpoint = ${RUNS:-1}
TOML
timeout "${BUDGET:-400}" .gpu/d2k campaign run "$WORK/plan.toml" --dir "$WORK/campaign" --progress-seconds 10 2>&1 | tail -40
echo "campaign rc=${PIPESTATUS[0]}"
"$PY" tools/device_holds.py "$WORK/campaign/device-holds.jsonl" | tee "$WORK/holds.txt"
.gpu/d2k report "$WORK/campaign" | tee "$WORK/report.txt" | tail -60
.gpu/d2k report "$WORK/campaign" --json "$WORK/report.json" > /dev/null
.gpu/d2k report "$WORK/campaign" --html "$WORK/report.html" > /dev/null
