#!/usr/bin/env bash
# The sandbox and agent end-to-end GPU scripts with the prebuilt binaries.
set -u
source .gpu/env.sh
export D2K=$PWD/.gpu/d2k SCRIPTED_SERVER=$PWD/.gpu/d2k-scripted-server
for t in sandbox_gpu agent_expert_gpu; do
  WORK=/tmp/e2e-$t /usr/bin/time -f "$t wall %e s" timeout 280 bash tests/e2e/$t.sh > $OUT/$t.txt 2>&1; echo "$t rc=$?"
  grep -E "^(ok|FAIL)|wall" $OUT/$t.txt | cut -c1-200 | tail -25
done
grep -h -o '"profile".\{0,600\}' /tmp/e2e-agent_expert_gpu/*-runs/*/transcript.jsonl 2>/dev/null | head -3 | cut -c1-600
