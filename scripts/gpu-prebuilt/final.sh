#!/usr/bin/env bash
# Final evaluations of shipped experts, one task after another, inside a wall-time budget: what a device
# call that verifies new kernels runs (carry [".gpu"]). Each task's table, JSON and JSON-lines progress
# go to $OUT/results.tgz as soon as it ends (the device tool brings back at most 8 files), so a call cut by
# its limit keeps what finished.
#   TASKS="quant/w4a16_gemm optim/muon_newton_schulz"  the tasks (their solution/cuda), in order (none: PROFILE only);
#                        "task@name" evaluates the task's candidates/name/ instead (docs/task-format.md)
#   SEED=1 REPEAT=1      seeds SEED.. SEED+REPEAT-1 (--repeat); REPEAT > 1 implies --no-baseline
#   BUDGET=540           seconds for the whole script; a task starts only with MIN_LEFT (60) seconds left
#   EXTRA="..."          more d2k eval options (e.g. "--max-seconds 0.3" or "-w NAME -w NAME")
#   PROFILE="task:workload ..."  then `d2k eval --profile` of each, if time is left
set -u
T0=$(date +%s)
left() { echo $(( ${BUDGET:-540} - ($(date +%s) - T0) )); }
source .gpu/env.sh
R=/tmp/final-results; rm -rf $R; mkdir -p $R
snap() { tar czf $OUT/results.tgz -C $R . ; }
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
cp .gpu/commit.txt $R/commit.txt  # the commit packed (scripts/gpu-pack), not the machine's git metadata
repeat=${REPEAT:-1}
options=(--final --seed "${SEED:-1}")
[ "$repeat" -gt 1 ] && options+=(--repeat "$repeat" --no-baseline)
for entry in ${TASKS:-}; do
  L=$(left)
  if [ "$L" -lt "${MIN_LEFT:-60}" ]; then echo "== $entry: skipped, $L s left"; continue; fi
  task=${entry%%@*}; solution=tasks/$task/solution/cuda
  [ "$entry" != "$task" ] && solution=tasks/$task/candidates/${entry#*@}
  [ -d "$solution" ] || { echo "== $entry: no folder $solution"; continue; }
  n=$(echo "$entry" | tr /@ _-)
  echo "== $entry: $solution ($L s left)"
  /usr/bin/time -f "wall %e s" timeout $(( L - 5 )) .gpu/d2k eval "$task" "$solution" "${options[@]}" ${EXTRA:-} \
    --json "$R/$n.json" --progress jsonl > "$R/$n.txt" 2> "$R/$n.progress"
  echo "$entry rc=$?"
  grep -v '^{' "$R/$n.progress" | grep -v "^frame #" | tail -3
  grep -vE "^\[" "$R/$n.txt" | tail -60
  snap
done
for p in ${PROFILE:-}; do
  L=$(left)
  [ "$L" -lt 40 ] && { echo "== profile $p: skipped, $L s left"; continue; }
  task=${p%%:*}; w=${p#*:}; n=$(echo "$task-$w" | tr / _)
  echo "== profile $task $w"
  timeout $(( L - 5 )) .gpu/d2k eval "$task" "tasks/$task/solution/cuda" --profile -w "$w" > "$R/profile-$n.txt" 2>&1
  echo "rc=$?"; grep -vE "^\[" "$R/profile-$n.txt" | tail -30
  snap
done
