# A campaign on a real single-node Slurm (tests/e2e/slurm_lib.bash starts munged, slurmctld and slurmd
# on localhost): two shards on the cpu device against the scripted model (tests/campaign/policy_model.py),
# submitted as a job array by `d2k campaign submit --slurm`, one shard cancelled mid-way (as a kill or a
# time limit would), the same command again resubmitting only that shard, which skips what it finished;
# merged, merged again (no change), reported.
#
# Where Slurm cannot start (not installed, not root, the daemons do not come up) the test is skipped
# (exit 77, which ctest reports as skipped, never as passed), unless this run requires Slurm
# (D2K_REQUIRE_SLURM=1, set by .ci/run, or CI=true): then it fails. `ctest -LE slurm` leaves it out.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/policy_models.bash"
source "$(dirname "$0")/slurm_lib.bash"
PY=python3
STARTED=$(date +%s)
SERVER_PID=""
cleanup() {
  local rc=$?
  [ -z "$SERVER_PID" ] || kill "$SERVER_PID" 2> /dev/null || true
  slurm_stop
  if [ "$D2K_FAILURES" != 0 ]; then echo "$D2K_FAILURES expectation(s) failed" >&2; exit 1; fi
  exit "$rc"
}
trap cleanup EXIT

if ! slurm_start; then
  case "${D2K_REQUIRE_SLURM:-}:${CI:-}" in
    1:*|*:true|*:1) fail_now "Slurm cannot start here, and this run requires it (D2K_REQUIRE_SLURM=${D2K_REQUIRE_SLURM:-}, CI=${CI:-}): $SLURM_WHY" ;;
  esac
  echo "SKIP: Slurm cannot start here: $SLURM_WHY"
  exit 77
fi
echo "ok: Slurm up in $(( $(date +%s) - STARTED )) s ($(sinfo -h -o '%P %D node(s) %c CPUs %T'))"

policy_models_start
# One run at a time per shard, so that a shard cancelled after its first run has runs left to resubmit.
cat > "$WORK/plan.toml" <<TOML
[campaign]
name = "slurm"
seed = 3
models_file = "models.toml"
models = ["expert", "weak"]
tasks = ["act/silu_and_mul", "moe/topk_softmax", "moe/sum_reduce"]
conditions = ["none", "L1"]
repeats = 1
device = "cpu"

[budget]
turns = 8

[timing]
max_seconds = 0.02
min_samples = 3
warmup = 1
timeout = 60

[concurrency]
runs = 1

[slurm]
shards = 2
minutes_per_run = 2
TOML
CAMPAIGN="$WORK/campaign"
SUBMIT=("$D2K" campaign submit --slurm "$WORK/plan.toml" --dir "$CAMPAIGN")
store_of() { echo "$CAMPAIGN/campaign.shard-$1-of-2.db"; }
finished_in() {  # SHARD: its finished runs
  "$PY" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM run WHERE state = '"'finished'"'").fetchone()[0])' "$(store_of "$1")" 2> /dev/null || echo 0
}
show_logs() { for f in "$CAMPAIGN"/slurm/*.out; do echo "--- $f"; tail -15 "$f"; done >&2; }

# The script, without submitting: a task per shard, each running its shard; no GPU asked for on the cpu device.
"${SUBMIT[@]}" --dry-run --partition e2e > "$WORK/dry.sbatch" 2> "$WORK/dry.err"
grep -q '^#SBATCH --array=0-1$' "$WORK/dry.sbatch" || fail_now "dry run: the array: $(cat "$WORK/dry.sbatch")"
grep -q '^#SBATCH --partition=e2e$' "$WORK/dry.sbatch" || fail_now "dry run: the partition"
grep -q '^#SBATCH --time=0-00:14:00$' "$WORK/dry.sbatch" || fail_now "dry run: the time: 2 minutes x (6 runs, one at a time, + 1)"
grep -q -- '--shard "${SLURM_ARRAY_TASK_ID}/2"' "$WORK/dry.sbatch" || fail_now "dry run: the shard"
if grep -q -- '--gres' "$WORK/dry.sbatch"; then fail_now "dry run: a GPU asked for on the cpu device"; fi
[ ! -e "$CAMPAIGN" ] || fail_now "dry run: it created the campaign's folder"
bash -n "$WORK/dry.sbatch" || fail_now "dry run: the script is not valid bash"
expect_exit 2 "$D2K" campaign submit "$WORK/plan.toml" --dir "$CAMPAIGN"  # --slurm is required
echo "ok: the dry run's script"

# Submitted; a second submission right away finds both shards queued and submits nothing.
JOB=$("${SUBMIT[@]}" 2> "$WORK/submit.err") || { cat "$WORK/submit.err"; fail_now "d2k campaign submit failed"; }
[[ $JOB =~ ^[0-9]+$ ]] || fail_now "submit printed '$JOB', not a job id"
echo "ok: submitted job $JOB: $(cat "$WORK/submit.err")"
AGAIN=$("${SUBMIT[@]}" 2> "$WORK/again.err")
expect_eq "$AGAIN" "" "a second submission while both shards are queued"
grep -q "shard 0 of 2: still queued or running" "$WORK/again.err" || fail_now "the second submission: $(cat "$WORK/again.err")"

# Shard 1 cancelled after its first run finished (Slurm signals it as at a time limit).
for _ in $(seq 1200); do [ "$(finished_in 1)" -ge 1 ] && break; sleep 0.1; done
[ "$(finished_in 1)" -ge 1 ] || { show_logs; fail_now "shard 1 finished no run within 120 s"; }
"$D2K" campaign status "$CAMPAIGN" > "$WORK/status.txt"
grep -q "shard 1 of 2 (campaign.shard-1-of-2.db): 6 runs, .* being run by process" "$WORK/status.txt" ||
  fail_now "status while shard 1 runs: $(cat "$WORK/status.txt")"
scancel "${JOB}_1"
slurm_wait "$JOB" 240 || { squeue; show_logs; fail_now "job $JOB did not end within 240 s"; }
slurm_states "$JOB" > "$WORK/states.txt"
expect_eq "$(tr '\n' ' ' < "$WORK/states.txt")" "0 COMPLETED 1 CANCELLED " "the array tasks' states"
[ "$(finished_in 1)" -lt 6 ] || fail_now "shard 1 finished every run before it was cancelled: nothing left to resubmit"
echo "ok: shard 0 completed, shard 1 cancelled with $(finished_in 1) of 6 runs finished"

# A merge now covers what finished, and says what did not (exit 1).
expect_exit 1 "$D2K" campaign merge "$CAMPAIGN"

# The same command again: only shard 1 is resubmitted.
BEFORE=$(finished_in 1)
JOB2=$("${SUBMIT[@]}" 2> "$WORK/resubmit.err") || { cat "$WORK/resubmit.err"; fail_now "the resubmission failed"; }
cat "$WORK/resubmit.err"
grep -q "shard 0 of 2: done (6 runs finished); not submitted" "$WORK/resubmit.err" || fail_now "the resubmission: shard 0"
grep -q "shard 1 of 2: $BEFORE of 6 runs finished ($((6 - BEFORE)) runs and" "$WORK/resubmit.err" || fail_now "the resubmission: shard 1"
grep -q '^#SBATCH --array=1$' "$CAMPAIGN/slurm/$JOB2.sbatch" || fail_now "the resubmission's array: $(grep array "$CAMPAIGN/slurm/$JOB2.sbatch")"
slurm_wait "$JOB2" 240 || { squeue; show_logs; fail_now "job $JOB2 did not end within 240 s"; }
expect_eq "$(slurm_states "$JOB2" | tr '\n' ' ')" "1 COMPLETED " "the resubmitted task's state"
grep -q "campaign slurm: 6 runs, $BEFORE finished before, $((6 - BEFORE)) to run" "$CAMPAIGN/slurm/${JOB2}_1.out" ||
  { show_logs; fail_now "the resubmitted shard did not skip its $BEFORE finished runs"; }
FINAL=$("${SUBMIT[@]}" 2> "$WORK/final.err")
expect_eq "$FINAL" "" "a submission once every shard is done"

# Merged, merged again: the second changes nothing.
"$D2K" campaign merge "$CAMPAIGN" > "$WORK/merge1.txt" || { cat "$WORK/merge1.txt"; fail_now "the merge"; }
"$D2K" campaign merge "$CAMPAIGN" > "$WORK/merge2.txt" || fail_now "the second merge"
cat "$WORK/merge2.txt"
grep -q "0 runs updated, 12 unchanged; 0 evaluations added" "$WORK/merge2.txt" || fail_now "the second merge changed something"
grep -q "12 of 12 runs finished" "$WORK/merge2.txt" || fail_now "the merged store is incomplete"

# The folder runs as two shards: a whole-campaign run, or a shard of another count, is refused.
set +e; "$D2K" campaign run "$WORK/plan.toml" --dir "$CAMPAIGN" 2> "$WORK/whole.err"; rc=$?; set -e
expect_eq "$rc" 2 "d2k campaign run without --shard in a folder of shards"
grep -q "the campaign runs as 2 shards" "$WORK/whole.err" || fail_now "the whole run's error: $(cat "$WORK/whole.err")"
set +e; "$D2K" campaign run "$WORK/plan.toml" --dir "$CAMPAIGN" --shard 0/3 2> "$WORK/three.err"; rc=$?; set -e
expect_eq "$rc" 2 "a shard of another count"
grep -q "holds the stores of 2 shards" "$WORK/three.err" || fail_now "the 0/3 shard's error: $(cat "$WORK/three.err")"

# Nothing redone: a run finished before the cancel ran once; each transcript has one prompt and one final.
"$PY" - "$CAMPAIGN" <<'PY'
import json, os, sqlite3, sys
dir = sys.argv[1]
merged = sqlite3.connect(os.path.join(dir, "campaign.db"))
rows = merged.execute("SELECT key, state, run_dir, attempts FROM run").fetchall()
assert len(rows) == 12 and all(state == "finished" for _, state, _, _ in rows), rows
for key, state, run_dir, attempts in rows:
    types = [json.loads(l)["type"] for l in open(os.path.join(run_dir, "transcript.jsonl"))]
    assert types.count("prompt") == 1 and types.count("final") == 1, (key, types)
shards = {}
for i in range(2):
    db = sqlite3.connect(os.path.join(dir, f"campaign.shard-{i}-of-2.db"))
    shards[i] = dict(db.execute("SELECT key, attempts FROM run").fetchall())
assert not set(shards[0]) & set(shards[1]) and len(shards[0]) == len(shards[1]) == 6
assert all(a == 1 for a in shards[0].values()), shards[0]
once = [k for k, a in shards[1].items() if a == 1]
assert len(once) >= 1, shards[1]  # finished before the cancel, or started only by the resubmission
assert merged.execute("SELECT COUNT(*) FROM evaluation WHERE kind = 'expert'").fetchone()[0] == 3
assert merged.execute("SELECT COUNT(*) FROM merged_shard").fetchone()[0] == 2
print(f"ok: 12 runs, one prompt and one final each; shard 1's attempts {sorted(shards[1].values())}")
PY

"$D2K" report "$CAMPAIGN" --json "$WORK/report.json" > "$WORK/report.txt" || fail_now "d2k report"
"$PY" - "$WORK/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["runs"]["finished"] == 12 and r["scored_by"] == "rerun", r["runs"]
arms = {(a["model"], a["condition"]): a for a in r["arms"]}
assert len(arms) == 4, arms.keys()
assert arms[("expert", "none")]["correctness"] == 1.0 and arms[("weak", "none")]["correctness"] == 0
assert arms[("weak", "L1")]["correctness"] == 1.0
print("ok: the report of the merged store")
PY
echo "ok: campaign_slurm took $(( $(date +%s) - STARTED )) s"
