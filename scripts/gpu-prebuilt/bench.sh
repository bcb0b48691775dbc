#!/usr/bin/env bash
# d2k bench on the shipped experts, SEED.. SEED+REPEAT-1 (hidden workloads included by bench); TASKS="a/b c/*"
# narrows it (bench -t), BUDGET (560) bounds it. bench.progress holds the finished workloads line by line
# for the ledger of seeds (docs/results/seeds/README.md), also when the budget cuts the run.
set -u
tasks=(); for t in ${TASKS:-}; do tasks+=(-t "$t"); done
source .gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
/usr/bin/time -f "wall %e s" timeout ${BUDGET:-560} .gpu/d2k bench "${tasks[@]}" --device cuda --seed ${SEED:-1} --repeat ${REPEAT:-10} --no-baseline --json $OUT/bench.json --progress jsonl > $OUT/bench.txt 2> $OUT/bench.progress; echo "bench rc=$?"
grep -v '^{' $OUT/bench.progress | tail -5
grep -vE "^\[" $OUT/bench.txt | tail -60
if [ -n "${CORPUS:-}" ]; then
  D2K=$PWD/.gpu/d2k WORK=/tmp/corpus-gpu timeout 300 bash tests/e2e/corpus_gpu.sh > $OUT/corpus_gpu.txt 2>&1; echo "corpus_gpu rc=$?"; grep -E "^(ok|FAIL)" $OUT/corpus_gpu.txt | cut -c1-200 | tail -30
fi
if [ -n "${WORKER_TESTS:-}" ]; then timeout 200 .gpu/test_worker_gpu > $OUT/test_worker_gpu.txt 2>&1; echo "test_worker_gpu rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/test_worker_gpu.txt | head; fi
