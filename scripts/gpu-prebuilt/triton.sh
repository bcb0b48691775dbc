#!/usr/bin/env bash
# The Triton solutions and the Triton cheat corpus on the GPU machine (carry [".gpu"]), inside a wall-time
# budget; tables, JSON and progress go to $OUT/triton.tgz as each step ends.
#   TASKS="norm/fused_add_rmsnorm quant/fp8_group_quant moe/topk_softmax"  tasks whose solution/triton to evaluate (--final)
#   SEED=1 REPEAT=1  BUDGET=240 (seconds)  CORPUS=1 (0: skip the corpus)  CORPUS_WORKLOAD=llama3-8b-T2048
set -u
T0=$(date +%s)
left() { echo $(( ${BUDGET:-240} - ($(date +%s) - T0) )); }
source .gpu/env.sh
R=/tmp/triton-results; rm -rf $R; mkdir -p $R
snap() { tar czf $OUT/triton.tgz -C $R . ; }
repeat=${REPEAT:-1}
options=(--final --seed "${SEED:-1}")
[ "$repeat" -gt 1 ] && options+=(--repeat "$repeat" --no-baseline)
for task in ${TASKS:-norm/fused_add_rmsnorm quant/fp8_group_quant moe/topk_softmax}; do
  L=$(left); [ "$L" -lt 30 ] && { echo "== $task: skipped, $L s left"; continue; }
  n=triton-$(echo "$task" | tr / _)
  echo "== $task triton ($L s left)"
  timeout $(( L - 5 )) .gpu/d2k eval "$task" "tasks/$task/solution/triton" "${options[@]}" \
    --json "$R/$n.json" --progress jsonl > "$R/$n.txt" 2> "$R/$n.progress"
  echo "rc=$?"; grep -v '^{' "$R/$n.progress" | tail -5; grep -vE "^\[" "$R/$n.txt" | tail -30
  snap
done
if [ "${CORPUS:-1}" = 1 ]; then
  w=${CORPUS_WORKLOAD:-llama3-8b-T2048}
  for c in library_torch library_numpy library_ctypes library_lazy_torch cache_by_pointer other_stream; do
    L=$(left); [ "$L" -lt 15 ] && { echo "== corpus $c: skipped"; continue; }
    timeout $(( L - 3 )) .gpu/d2k eval norm/fused_add_rmsnorm "tests/corpus/${c}_triton.py" -w "$w" \
      --json "$R/corpus-$c.json" > "$R/corpus-$c.txt" 2>&1
    echo "corpus $c rc=$?: $(grep -E "^norm/fused_add_rmsnorm +$w" "$R/corpus-$c.txt" | awk '{print $3}')"
    grep -E "^norm/fused_add_rmsnorm $w:" "$R/corpus-$c.txt" | head -2
  done
  snap
fi
