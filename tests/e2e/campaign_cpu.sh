# A campaign on the cpu device against a scripted model (tests/campaign/policy_model.py): 2 models x 3
# tasks x (none, L1, L1+L2, L1+L2+L3, design-only) x 2 repeats = 60 runs, killed with SIGKILL at several
# points (inside the agent loop, and from outside while runs and re-runs are in flight), resumed each
# time, then reported. Nothing may be redone or lost: every run has one transcript with one prompt and
# one final record, the store's usage rows match the transcripts' responses, and the report's numbers
# follow from the policy (the weak model fails under none, is about half the expert's speed under L1).
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/policy_models.bash"
PY=python3
STARTED=$(date +%s)

SERVER_PID=""
trap '[ -z "$SERVER_PID" ] || kill $SERVER_PID 2>/dev/null || true; if [ "$D2K_FAILURES" != 0 ]; then echo "$D2K_FAILURES expectation(s) failed" >&2; exit 1; fi' EXIT
finished() {  # the finished runs in the store (python's sqlite3: no sqlite3 program needed)
  "$PY" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM run WHERE state = '"'finished'"'").fetchone()[0])' "$CAMPAIGN/campaign.db" 2>/dev/null || echo 0
}
policy_models_start

cat > "$WORK/plan.toml" <<TOML
[campaign]
name = "ci"
seed = 11
models_file = "models.toml"
models = ["expert", "weak"]
tasks = ["act/silu_and_mul", "moe/topk_softmax", "moe/sum_reduce"]
conditions = ["none", "L1", "L1+L2", "L1+L2+L3", "design-only"]
repeats = 2
device = "cpu"

[budget]
turns = 8
max_tokens_total = 400000

[timing]
max_seconds = 0.02
min_samples = 3
warmup = 1
timeout = 60

[concurrency]
runs = 4
per_endpoint = 2
TOML
CAMPAIGN="$WORK/campaign"
RUN=("$D2K" campaign run "$WORK/plan.toml" --dir "$CAMPAIGN" --progress-seconds 5)

# The cost before anything runs.
"$D2K" campaign run "$WORK/plan.toml" --dry-run > "$WORK/dry.txt"
cat "$WORK/dry.txt"
grep -q "= 60 runs, at most 480 turns" "$WORK/dry.txt" || fail_now "dry run: the run count"
grep -q "total: at most 24000000 tokens" "$WORK/dry.txt" || fail_now "dry run: the token bound"
[ ! -e "$CAMPAIGN" ] || fail_now "dry run: it created the campaign"

# A plan error names the file, the line, the field and the value.
sed 's/repeats = 2/repeats = -1/' "$WORK/plan.toml" > "$WORK/bad.toml"
set +e; "$D2K" campaign run "$WORK/bad.toml" 2> "$WORK/bad.err"; rc=$?; set -e
expect_eq "$rc" 2 "a bad plan's exit code"
grep -q 'bad.toml:8: campaign.repeats = -1: must be at least 1' "$WORK/bad.err" || { cat "$WORK/bad.err"; fail_now "the plan error"; }
# campaign.language: the cpu device has no Triton backend, and the error names the language and the device.
sed 's/^device = "cpu"$/device = "cpu"\nlanguage = "triton"/' "$WORK/plan.toml" > "$WORK/triton.toml"
set +e; "$D2K" campaign run "$WORK/triton.toml" 2> "$WORK/triton.err"; rc=$?; set -e
expect_eq "$rc" 2 "triton on the cpu device: exit code"
grep -q 'triton.toml:10: campaign.language = "triton": the cpu device (campaign.device = "cpu") has no Triton backend' \
  "$WORK/triton.err" || { cat "$WORK/triton.err"; fail_now "the campaign.language error"; }

# Kills at points inside the agent loop (D2K_AGENT_CRASH_AT: the n-th time any run of the process gets
# there), each followed by the next start, which resumes what was in flight.
for point in request:3 tool:9 write:40 end:5 response:30; do
  expect_exit 137 env D2K_AGENT_CRASH_AT="$point" "${RUN[@]}"
  "$D2K" campaign status "$CAMPAIGN" > "$WORK/status.txt"
  grep -q "not running" "$WORK/status.txt" || fail_now "status after a kill"
  grep -q "; language cuda)" "$WORK/status.txt" || { cat "$WORK/status.txt"; fail_now "status: the campaign's language"; }
  echo "ok: killed at $point; $(sed -n 2p "$WORK/status.txt")"
done

# A kill from outside while runs are in flight: wait until some have finished since this start.
"${RUN[@]}" > "$WORK/outside.out" 2> "$WORK/outside.err" &
pid=$!
before=$(finished)
for _ in $(seq 600); do
  now=$(finished)
  [ "$now" -ge $((before + 3)) ] && break
  sleep 0.2
done
# Status from another shell while it runs; a second driver is refused.
"$D2K" campaign status "$CAMPAIGN" > "$WORK/status.txt"
grep -q "being run by process $pid" "$WORK/status.txt" || { cat "$WORK/status.txt"; fail_now "status of a running campaign"; }
set +e; "${RUN[@]}" > /dev/null 2> "$WORK/second.err"; rc=$?; set -e
expect_eq "$rc" 2 "a second driver's exit code"
grep -q "is being run by process $pid" "$WORK/second.err" || fail_now "the second driver's error"
kill -KILL "$pid"
wait "$pid" || true
echo "ok: killed from outside after $(finished) finished runs"

# Once more from outside, during the re-runs after every run, then to the end.
"${RUN[@]}" > "$WORK/rerun.out" 2> "$WORK/rerun.err" &
pid=$!
for _ in $(seq 3000); do grep -q "re-running" "$WORK/rerun.err" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
kill -KILL "$pid"
wait "$pid" || true
grep -q "re-running" "$WORK/rerun.err" || fail_now "the campaign never reached its re-runs"
expect_exit 0 "${RUN[@]}"

# Nothing redone, nothing lost.
"$PY" - "$CAMPAIGN" <<'PY'
import json, sqlite3, sys, os
db = sqlite3.connect(os.path.join(sys.argv[1], "campaign.db"))
# No campaign.language on the cpu device: the device's default, cuda (host C++), in the store and every run.
assert db.execute("SELECT language FROM campaign").fetchone()[0] == "cuda"
rows = db.execute("SELECT key, state, run_dir, attempts, status, passed FROM run").fetchall()
assert len(rows) == 60, len(rows)
resumed = 0
for key, state, run_dir, attempts, status, passed in rows:
    assert state == "finished", (key, state)
    records = [json.loads(l) for l in open(os.path.join(run_dir, "transcript.jsonl"))]
    types = [r["type"] for r in records]
    assert types.count("prompt") == 1 and types.count("final") == 1 and types.count("end") == 1, (key, types)
    assert json.load(open(os.path.join(run_dir, "run.json")))["language"] == "cuda", key
    responses = [r["seq"] for r in records if r["type"] == "response"]
    stored = [s for (s,) in db.execute("SELECT seq FROM turn_usage WHERE key = ? ORDER BY seq", (key,))]
    assert stored == responses, (key, stored, responses)
    final = records[-1]
    assert final["type"] == "final" and final["status"] == status and bool(final["passed"]) == bool(passed), key
    resumed += "resume" in types
    model, task, condition = key.split("/")[0], "/".join(key.split("/")[1:3]), key.split("/")[3]
    want = not (model == "weak" and condition == "none")
    assert bool(passed) == want, (key, passed)
assert resumed >= 3, resumed
assert db.execute("SELECT COUNT(*) FROM evaluation WHERE kind = 'expert' AND passed = 1").fetchone()[0] == 3
assert db.execute("SELECT COUNT(*) FROM evaluation WHERE kind = 'final'").fetchone()[0] == 60
reruns = db.execute("SELECT COUNT(*) FROM evaluation WHERE kind = 'rerun'").fetchone()[0]
assert reruns == 42, reruns  # the passing runs with code: 2 x 3 x 4 x 2, less weak/none's 6
print(f"ok: 60 runs finished once each ({resumed} resumed from their transcripts), usage rows match the transcripts, "
      f"3 expert and {reruns} re-run evaluations")
PY

# A judge score file in a run folder, where `d2k judge code <run folder>` writes it (docs/judge.md).
mkdir -p "$CAMPAIGN/runs/expert__act__silu_and_mul__none__0/judge"
echo '{"kind": "code", "task": "act/silu_and_mul", "judge": {"model": "judge-x"}, "complete": true, "score": 62.5, "items": {}}' \
  > "$CAMPAIGN/runs/expert__act__silu_and_mul__none__0/judge/code-judge-x.json"

# The report: terminal, JSON, CSV, HTML (rendered in a browser by tests/e2e/report_html.sh).
"$D2K" report "$CAMPAIGN" --json "$WORK/report.json" --csv "$WORK/csv" --html "$WORK/report.html" > "$WORK/report.txt"
cat "$WORK/report.txt"
"$PY" - "$WORK/report.json" "$WORK/csv" <<'PY'
import json, sys, os, csv
r = json.load(open(sys.argv[1]))
assert r["runs"]["finished"] == 60 and r["scored_by"] == "rerun", r["runs"]
assert r["language"] == "cuda", r["language"]
arms = {(a["model"], a["condition"]): a for a in r["arms"]}
assert len(arms) == 10, len(arms)
for c in ["none", "L1", "L1+L2", "L1+L2+L3"]:
    a = arms[("expert", c)]
    assert a["correctness"] == 1.0 and 0.6 < a["performance_score"] < 1.6, (c, a)
weak = {c: arms[("weak", c)] for c in ["none", "L1", "L1+L2", "L1+L2+L3", "design-only"]}
assert weak["none"]["correctness"] == 0 and weak["none"]["fast_1"] == 0, weak["none"]
assert weak["L1"]["correctness"] == 1.0 and 0.3 < weak["L1"]["performance_score"] < 0.8, weak["L1"]
assert weak["design-only"]["design_only"] and weak["design-only"]["pass_rate"] == 1.0
assert weak["L1+L2"]["performance_score"] > weak["L1"]["performance_score"]
paired = {(d["model"], d["condition"]): d for d in r["paired"]}
# Equal repeats: the geomean ratio of the pairs is the ratio of the two arms' Performance Scores. (On the cpu
# device eager libtorch beats the cpu experts, so a failed task, scored at t_expert / t_eager, scores above
# a correct one: the cpu device is a test seam, not a benchmark.)
assert len(paired) == 6 and paired[("weak", "L1")]["pairs"] == 6, paired[("weak", "L1")]
want = weak["L1"]["performance_score"] / weak["none"]["performance_score"]
assert abs(paired[("weak", "L1")]["ratio"] / want - 1) < 1e-9, (paired[("weak", "L1")], want)
lo, hi = paired[("weak", "L1")]["interval95"]
assert lo <= paired[("weak", "L1")]["ratio"] <= hi
assert paired[("weak", "L1")]["wilcoxon"]["n"] == 6
ablation = [(d["model"], d["against"], d["condition"]) for d in r["ablation"]]
assert ("weak", "none", "L1") in ablation and ("weak", "L1+L2", "L1+L2+L3") in ablation and len(ablation) == 6
assert len(r["cells"]) == 30 and r["judge"]["implementation_pairs"] == 1
assert abs(arms[("expert", "none")]["judge"] - 0.625) < 1e-12 and arms[("expert", "L1")]["judge"] is None
assert any(a["model"] == "expert" for a in r["all_correct"])
assert arms[("expert", "none")]["cost_usd"] > 0 and arms[("expert", "none")]["cost_usd_per_pass"] > 0
rows = list(csv.reader(open(os.path.join(sys.argv[2], "arms.csv"))))
assert rows[0][:3] == ["model", "condition", "tasks"] and len(rows) == 11, rows[:2]
for name in ["cells", "tasks", "paired", "ablation", "all_correct"]:
    assert os.path.getsize(os.path.join(sys.argv[2], name + ".csv")) > 0
print("ok: the report's arms, cells, paired deltas, ablation and CSV agree with the policy")
PY
grep -q "Paired against none" "$WORK/report.txt" || fail_now "the terminal report"
grep -q "^campaign ci on cpu (.*), language cuda: 60 runs" "$WORK/report.txt" || fail_now "the terminal report's header"
grep -q '<table id="table-arms">' "$WORK/report.html" || fail_now "the HTML report has no arms table: $WORK/report.html"

# The device lock over the whole campaign (4 runs at once, restarts after kills): the journal of its holds
# shows no timed evaluation beside anything else on the device, and checks side by side.
"$PY" "$D2K_ROOT/tools/device_holds.py" "$CAMPAIGN/device-holds.jsonl" --min-concurrent-shared 2 > "$WORK/holds.txt" ||
  { cat "$WORK/holds.txt"; fail_now "the device lock's journal"; }
grep -q "^device 0: .* from [2-9][0-9]* process(es)" "$WORK/holds.txt" || { cat "$WORK/holds.txt"; fail_now "the journal spans the restarts"; }
echo "ok: $(head -1 "$WORK/holds.txt")"
# ... and the check can fail: a timed hold that overlaps a check of its device (another device's does not count).
printf '%s\n' '{"device": 0, "exclusive": true, "acquired": 100.0, "released": 101.0, "pid": 1}' \
  '{"device": 1, "exclusive": false, "acquired": 100.5, "released": 100.7, "pid": 2}' \
  '{"device": 0, "exclusive": false, "acquired": 100.9, "released": 102.0, "pid": 2}' > "$WORK/bad-holds.jsonl"
set +e; "$PY" "$D2K_ROOT/tools/device_holds.py" "$WORK/bad-holds.jsonl" > "$WORK/bad-holds.txt"; rc=$?; set -e
expect_eq "$rc" 1 "device_holds.py on overlapping holds"
grep -q "^overlap on device 0: exclusive hold of line 1 (pid 1, 100.000000-101.000000) and shared hold of line 3" "$WORK/bad-holds.txt" ||
  { cat "$WORK/bad-holds.txt"; fail_now "device_holds.py names the overlap"; }
# tools/campaign_medians.py, the comparison of two runs of a plan (issue 19), against the store itself.
"$PY" "$D2K_ROOT/tools/campaign_medians.py" "$CAMPAIGN/campaign.db" "$CAMPAIGN/campaign.db" > "$WORK/medians.txt" ||
  fail_now "campaign_medians.py"
grep -q "^final (B against A): [1-9][0-9]* medians, geomean B/A 1.0000, largest deviation 0.00%, 100% inside" "$WORK/medians.txt" ||
  { cat "$WORK/medians.txt"; fail_now "campaign_medians.py on one store twice"; }
grep -q "^A's final against A's re-run (the noise): [1-9]" "$WORK/medians.txt" || { cat "$WORK/medians.txt"; fail_now "campaign_medians.py's noise line"; }
echo "ok: campaign_cpu took $(( $(date +%s) - STARTED )) s"
