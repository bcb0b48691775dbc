#!/usr/bin/env bash
# Nsight Compute profiles of shipped experts, one workload each (`d2k eval --profile`: untimed; time, DRAM
# traffic, throughputs and occupancy per kernel). PROFILES="task:workload task:workload ..." picks them;
# BUDGET (540) bounds the whole call: no profile is started after BUDGET - 40 s. Each profile lands in
# $OUT/profile/<task>--<workload>.txt; a line per profile (rc, seconds) goes to stdout.
set -u
source .gpu/env.sh
mkdir -p $OUT/profile
start=$(date +%s)
for pair in ${PROFILES:?PROFILES=\"task:workload ...\"}; do
  task=${pair%%:*} workload=${pair#*:}
  if [ $(( $(date +%s) - start )) -gt $(( ${BUDGET:-540} - 40 )) ]; then echo "$pair: skipped (budget)"; continue; fi
  file=$OUT/profile/$(echo $task | tr / _)--$workload.txt
  t0=$(date +%s)
  timeout 120 .gpu/d2k eval $task tasks/$task/solution/cuda --device cuda --profile -w $workload > $file 2>&1
  echo "$pair: rc=$? $(( $(date +%s) - t0 )) s"
done
