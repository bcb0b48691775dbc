# Progress and the run summary through the command line: --progress jsonl writes one JSON object per
# event on stderr (the run and its seed, build, steps, each workload's status, seed and median), none writes
# no progress, text a line per step; the run summary (passed, total, geomean, throttled, overhead) is the same in the table and in --json.
source "$(dirname "$0")/lib.bash"
task=norm/fused_add_rmsnorm
expert="$D2K_ROOT/tasks/$task/solution/cpu"
wrong="$D2K_ROOT/tests/e2e/solutions/wrong_answer.cpp"
fast=(--device cpu --max-seconds 0.05 --min-samples 3 --warmup 1)

"$D2K" eval $task "$expert" -w llama3-8b-T1 -w llama3-8b-T2048 "${fast[@]}" --progress jsonl \
  --json "$WORK/expert.json" > "$WORK/expert.txt" 2> "$WORK/expert.err"
python3 - "$WORK/expert.err" "$WORK/expert.json" "$WORK/expert.txt" <<'PY'
import json, re, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
kinds = [e["event"] for e in events]
assert kinds[:3] == ["run", "building", "built"] and events[2]["ok"], events[:3]
assert events[0] == {"event": "run", "run": 1, "runs": 1, "seed": 1}, events[0]  # the default seed
finished = [e for e in events if e["event"] == "finished"]
assert [(e["workload"], e["status"], e["index"], e["count"], e["seed"], e["solution"]) for e in finished] == \
    [("llama3-8b-T1", "passed", 1, 2, 1, "cpu"), ("llama3-8b-T2048", "passed", 2, 2, 1, "cpu")], finished
assert all(e["median_ms"] > 0 for e in finished), finished
steps = [e["step"] for e in events if e["event"] == "step"]
assert "oracle" in steps and all(e["task"] == "norm/fused_add_rmsnorm" for e in events[1:]), steps
text = open(sys.argv[1]).read()
assert "[1/2]" not in text, "text progress in jsonl mode"
s = json.load(open(sys.argv[2]))["summary"]
assert s["passed"] == 2 and s["total"] == 2 and s["throttled"] == 0, s
assert s["geomean_speedup"] > 0 and s["overhead"]["workloads"] == 2, s
table = open(sys.argv[3]).read()
line = re.search(r"^(\d+) of (\d+) passed; geomean speedup over eager ([0-9.]+)x$", table, re.M)
assert line, table
assert (int(line[1]), int(line[2])) == (2, 2) and abs(float(line[3]) - s["geomean_speedup"]) < 0.006, (line[0], s)
print(f"ok: {len(events)} JSON events; table and JSON carry the same summary ({line[0]})")
PY

expect_exit 1 "$D2K" eval $task "$wrong" -w llama3-8b-T1 "${fast[@]}" --no-baseline --progress none \
  --json "$WORK/wrong.json" > "$WORK/wrong.txt" 2> "$WORK/wrong.err"
if grep -Eq '^\[1/1\]|^\{|building' "$WORK/wrong.err"; then echo "FAIL: progress with --progress none:" >&2; cat "$WORK/wrong.err" >&2; exit 1; fi
python3 - "$WORK/wrong.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
assert s["passed"] == 0 and s["total"] == 1 and s["geomean_speedup"] is None, s
print("ok: --progress none is silent; the summary counts the failure")
PY
grep -q "^0 of 1 passed$" "$WORK/wrong.txt" || { echo "FAIL: no '0 of 1 passed' in the table" >&2; exit 1; }
echo "ok: the table's summary line"

"$D2K" eval $task "$expert" -w llama3-8b-T1 "${fast[@]}" --no-baseline --repeat 2 --seed 3 > /dev/null 2> "$WORK/repeat.err"
if ! grep -q "^d2k: run 2 of 2 (seed 4)$" "$WORK/repeat.err" || ! grep -q "^\[1/1\] $task llama3-8b-T1: passed in" "$WORK/repeat.err"; then
  echo "FAIL: text progress:" >&2; cat "$WORK/repeat.err" >&2; exit 1
fi
echo "ok: text progress by default, with the runs of --repeat"
expect_exit 2 "$D2K" eval $task "$expert" --progress loud
