#!/usr/bin/env bash
# The next seeds of the ledger (docs/results/seeds/), task after task, inside one wall-time budget: for each
# cuda expert short of NEED (20) consecutive seeds, `tools/seed_ledger.py next` says where its run goes on
# and how many seeds it lacks, and bench.sh runs them (its --time-limit cuts a task's seeds to what is
# left). Each task's files go to $OUT/<task with _>/ (bench.progress feeds `seed_ledger.py extract`).
#   TASKS="a/b c/d"   only these tasks, in this order (default: every short task, in the ledger's order)
#   BUDGET (540)      seconds for all of it; MIN_LEFT (60): no task is started with less left than that
set -u
budget=${BUDGET:-540} min_left=${MIN_LEFT:-60} start=$(date +%s)
narrow=(); for t in ${TASKS:-}; do narrow+=(--task "$t"); done
plan=$(python3 tools/seed_ledger.py next --need "${NEED:-20}" --root . "${narrow[@]}" docs/results/seeds/*.csv) || exit 1
echo "plan (task, first seed, seeds lacking):"; echo "$plan"
if [ -n "${TASKS:-}" ]; then  # the order asked for
  ordered=""; for t in $TASKS; do ordered+=$(grep "^$t " <<< "$plan")$'\n'; done; plan=$ordered
fi
while read -r task first count; do
  [ -z "$task" ] && continue
  left=$(( budget - ($(date +%s) - start) ))
  if [ "$left" -lt "$min_left" ]; then echo "seeds.sh: $task not started: ${left} s left"; continue; fi
  dir=$OUT/$(echo "$task" | tr / _); mkdir -p "$dir"
  echo "== $task: seeds $first.. ($count lacking), ${left} s left"
  OUT=$dir TASKS=$task SEED=$first REPEAT=$count BUDGET=$left bash .gpu/bench.sh 2>&1 | grep -E "passed every run|ran [0-9]+ of|bench rc|FAIL|failed" | tail -4
done <<< "$plan"
echo "seeds.sh: $(( $(date +%s) - start )) s"
