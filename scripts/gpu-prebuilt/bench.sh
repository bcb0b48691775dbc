#!/usr/bin/env bash
# d2k bench on the shipped experts, SEED.. SEED+REPEAT-1 (hidden workloads included by bench); TASKS="a/b c/*"
# narrows it (bench -t), BUDGET (560) bounds it (no seed is started that would not end 15 s before it, so the JSON and the table
# are written), BASELINE=1 times the eager and library paths too. bench.progress holds the finished workloads line by line
# for the ledger of seeds (docs/results/seeds/README.md), also when the budget cuts the run.
set -u
# BASELINE=1: the eager and library paths timed too (the SDPA and cuBLAS/_scaled_mm/_int_mm columns); off by
# default, as the ledger of seeds needs the experts alone.
baseline=--no-baseline; [ -n "${BASELINE:-}" ] && baseline=
tasks=(); for t in ${TASKS:-}; do tasks+=(-t "$t"); done
source .gpu/env.sh
# The machine, in $OUT too: the ledger of seeds names the GPU by its UUID.
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee $OUT/gpu.txt
/usr/bin/time -f "wall %e s" timeout ${BUDGET:-560} .gpu/d2k bench "${tasks[@]}" --time-limit $(( ${BUDGET:-560} - 15 )) --device cuda --seed ${SEED:-1} --repeat ${REPEAT:-10} $baseline --json $OUT/bench.json --progress jsonl > $OUT/bench.txt 2> $OUT/bench.progress; echo "bench rc=$?"
grep -v '^{' $OUT/bench.progress | tail -5
grep -vE "^\[" $OUT/bench.txt | tail -60
if [ -n "${CORPUS:-}" ]; then
  D2K=$PWD/.gpu/d2k WORK=/tmp/corpus-gpu timeout 300 bash tests/e2e/corpus_gpu.sh > $OUT/corpus_gpu.txt 2>&1; echo "corpus_gpu rc=$?"; grep -E "^(ok|FAIL)" $OUT/corpus_gpu.txt | cut -c1-200 | tail -30
fi
if [ -n "${WORKER_TESTS:-}" ]; then timeout 200 .gpu/test_worker_gpu > $OUT/test_worker_gpu.txt 2>&1; echo "test_worker_gpu rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/test_worker_gpu.txt | head; fi
