#!/usr/bin/env bash
# Eval wall time at the current commit (prebuilt binaries), default strict sandbox; per-phase times.
set -u
source .gpu/env.sh
df -h /tmp /dev/shm | tail -2; nproc
.gpu/d2k ceilings --device cuda 2>&1 | tail -2
.gpu/d2k eval norm/fused_add_rmsnorm tasks/norm/fused_add_rmsnorm/solution/cuda --device cuda -w llama3-8b-T1 > $OUT/warm.txt 2>&1; echo "warm rc=$?"; tail -3 $OUT/warm.txt
for t in ${TASKS:-norm/fused_add_rmsnorm quant/fp8_group_quant moe/topk_softmax}; do
  n=$(echo $t | tr / _)
  .gpu/d2k eval $t tasks/$t/solution/cuda --device cuda -w $(case $t in norm*) echo llama3-8b-T1;; moe*) echo qwen3-30b-T1;; *) echo deepseek-v3-T1;; esac) > /dev/null 2>&1
  /usr/bin/time -f "wall %e s" .gpu/d2k eval $t tasks/$t/solution/cuda --device cuda --json $OUT/eval-$n.json > $OUT/eval-$n.txt 2>&1; echo "$t rc=$?"
  grep -E "wall|harness|passed;" $OUT/eval-$n.txt
  python3 - $OUT/eval-$n.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
tr=d if isinstance(d,list) else d.get("traces",d)
for t in tr:
    ph=" ".join(f"{p['name']}={p['seconds']:.2f}" for p in t.get("phases",[]))
    print(f"  {t['workload']}: {t['status']} {t.get('wall_seconds',0):.2f}s | {ph}")
PY
done
