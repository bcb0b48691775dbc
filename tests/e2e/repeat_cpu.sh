# `--repeat N` evaluates N times with consecutive seeds: every run's traces in the JSON, one row per
# workload with N passes and the spread of the medians; a solution that fails gets 0/N and exit 1.
source "$(dirname "$0")/lib.bash"
"$D2K" eval moe/topk_softmax "$D2K_ROOT/tasks/moe/topk_softmax/solution/cpu" --device cpu --seed 5 --repeat 3 \
  -w qwen3-30b-T1 -w mixtral-8x7b-T4096 --max-seconds 0.05 --min-samples 3 --warmup 1 --no-baseline \
  --json "$WORK/repeat.json" | tee "$WORK/repeat.txt"
python3 - "$WORK/repeat.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [t["seed"] for run in d["runs"] for t in run["traces"]] == [5, 5, 6, 6, 7, 7], d["runs"]
rows = {r["workload"]: r for r in d["repeat"]}
for name in ("qwen3-30b-T1", "mixtral-8x7b-T4096"):
    r = rows[name]
    assert r["runs"] == 3 and r["passed"] == 3 and not r["failures"], r
    assert len(r["medians_ms"]) == 3 and r["min_ms"] <= r["median_ms"] <= r["max_ms"], r
    assert abs(r["spread"] - (r["max_ms"] - r["min_ms"]) / r["median_ms"]) < 1e-12, r
print("ok: 3 runs, seeds 5..7, 3/3 passes per workload")
PY
grep -q "2 of 2 workloads passed every run" "$WORK/repeat.txt" && echo "ok: summary line"
expect_exit 1 "$D2K" eval norm/fused_add_rmsnorm "$D2K_ROOT/tests/e2e/solutions/wrong_answer.cpp" --device cpu --repeat 2 \
  -w llama3-8b-T1 --no-baseline --json "$WORK/wrong.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["repeat"][0]; assert r["passed"]==0 and len(r["failures"])==2, r; print("ok: wrong answer fails both runs")' "$WORK/wrong.json"
# --time-limit starts no run that the longest so far says would end past it: the runs done are reported
# (the document and the table, exit 0 when they passed), with a note of how many of how many ran.
"$D2K" eval moe/topk_softmax "$D2K_ROOT/tasks/moe/topk_softmax/solution/cpu" --device cpu --seed 5 --repeat 50 \
  --time-limit 0.001 -w qwen3-30b-T1 --max-seconds 0.05 --min-samples 3 --warmup 1 --no-baseline \
  --json "$WORK/limited.json" > "$WORK/limited.txt" 2> "$WORK/limited.err"
grep -q -- "--time-limit 0.001 s: ran 1 of 50 runs (seeds 5..5)" "$WORK/limited.err" && echo "ok: the note says 1 of 50 runs" ||
  fail_now "no time-limit note: $(cat "$WORK/limited.err")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["runs"])==1 and d["runs_requested"]==50 and d["repeat"][0]["runs"]==1, d["repeat"]; print("ok: one run reported of 50 requested")' "$WORK/limited.json"
