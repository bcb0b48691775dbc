# tools/seed_ledger.py: ledger rows from a real `--repeat` run's progress lines, the consecutive seeds per
# task, a failure on one workload breaking the run at its seed, cuda rows held to every workload of
# task.toml (--root), and --need's exit code.
source "$(dirname "$0")/lib.bash"
ledger=(python3 "$D2K_ROOT/tools/seed_ledger.py")
"$D2K" eval moe/topk_softmax "$D2K_ROOT/tasks/moe/topk_softmax/solution/cpu" --device cpu --seed 3 --repeat 3 \
  -w qwen3-30b-T1 -w mixtral-8x7b-T4096 --max-seconds 0.02 --min-samples 2 --warmup 0 --no-baseline \
  --progress jsonl > /dev/null 2> "$WORK/run.progress"
"${ledger[@]}" extract --device cpu --gpu "cpu (CI)" --commit test --date 2026-12-02 --source seed_ledger_cpu.sh \
  "$WORK/run.progress" > "$WORK/cpu.csv"
python3 - "$WORK/cpu.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert sorted((r["workload"], int(r["seed"])) for r in rows) == sorted(
    (w, s) for w in ("qwen3-30b-T1", "mixtral-8x7b-T4096") for s in (3, 4, 5)), rows
assert all(r["status"] == "passed" and r["solution"] == "cpu" and float(r["median_us"]) > 0 for r in rows), rows
print("ok: 6 rows, seeds 3-5, each passed with its median")
PY
"${ledger[@]}" report --need 3 "$WORK/cpu.csv" | tee "$WORK/report.txt"
grep -q "moe/topk_softmax (cpu, cpu): 3 consecutive seeds with all 2 workloads passed (seeds 3-5)" "$WORK/report.txt"
echo "ok: 3 consecutive seeds"
expect_exit 1 "${ledger[@]}" report --need 4 "$WORK/cpu.csv"

# A failure of one workload at seed 4 breaks the run there, whatever the other workload did.
cp "$WORK/cpu.csv" "$WORK/broken.csv"
echo "moe/topk_softmax,cpu,cpu,qwen3-30b-T1,4,incorrect_numerics,,2026-12-02,cpu (CI),test,hand" >> "$WORK/broken.csv"
"${ledger[@]}" report "$WORK/broken.csv" | tee "$WORK/broken.txt"
grep -q "1 consecutive seeds with all 2 workloads passed (seeds 3-3)" "$WORK/broken.txt"
grep -q "seed 4: qwen3-30b-T1: incorrect_numerics (broken.csv:8" "$WORK/broken.txt"
echo "ok: a failure breaks the run at its seed and is listed"

# cuda rows with --root: every workload of task.toml (7 for moe/sum_reduce) or the seed does not count.
python3 - "$D2K_ROOT" "$WORK/cuda.csv" <<'PY'
import csv, sys, tomllib
root, out = sys.argv[1:]
names = [w["name"] for w in tomllib.load(open(f"{root}/tasks/moe/sum_reduce/task.toml", "rb"))["workloads"]]
assert len(names) == 7, names
w = csv.writer(open(out, "w", newline=""))
w.writerow(["task", "solution", "device", "workload", "seed", "status", "median_us", "date", "gpu", "commit", "source"])
for seed in (1, 2):
    for name in names[:-1] if seed == 2 else names:  # seed 2 misses the last workload
        w.writerow(["moe/sum_reduce", "cuda", "cuda", name, seed, "passed", "1.0", "2026-12-02", "H200", "x", "hand"])
PY
"${ledger[@]}" report --root "$D2K_ROOT" "$WORK/cuda.csv" | tee "$WORK/cuda.txt"
grep -q "moe/sum_reduce (cuda, cuda): 1 consecutive seeds with all 7 workloads passed (seeds 1-1)" "$WORK/cuda.txt"
echo "ok: a seed that missed a workload does not count"
# ... and every other task of the repository is listed with no seed, and counts as short with --need.
grep -q "norm/fused_add_rmsnorm (cuda, cuda): 0 consecutive seeds: no row in the ledger" "$WORK/cuda.txt"
expect_eq "$(grep -c ': 0 consecutive seeds: no row' "$WORK/cuda.txt")" "$(( $(ls "$D2K_ROOT"/tasks/*/*/task.toml | wc -l) - 1 ))" \
  "tasks listed without rows"
expect_exit 1 "${ledger[@]}" report --root "$D2K_ROOT" --need 1 "$WORK/cuda.csv"
"${ledger[@]}" report --root "$D2K_ROOT" --need 1 --task moe/sum_reduce "$WORK/cuda.csv" > /dev/null
echo "ok: --task narrows the listing to the task asked for"

# next: where each short run goes on. sum_reduce has seed 1 complete and seed 2 cut short: it goes on at 2
# with 19 lacking; a task without rows starts at 1; a failure (seed 5) starts a new run after it.
expect_eq "$("${ledger[@]}" next --need 20 --root "$D2K_ROOT" --task moe/sum_reduce "$WORK/cuda.csv")" "moe/sum_reduce 2 19" \
  "next after a complete seed 1 and an incomplete seed 2"
expect_eq "$("${ledger[@]}" next --need 20 --root "$D2K_ROOT" --task norm/fused_add_rmsnorm "$WORK/cuda.csv")" \
  "norm/fused_add_rmsnorm 1 20" "next of a task without rows"
cp "$WORK/cuda.csv" "$WORK/cuda_failed.csv"
echo "moe/sum_reduce,cuda,cuda,any,5,incorrect_numerics,,2026-12-02,H200,x,hand" >> "$WORK/cuda_failed.csv"
expect_eq "$("${ledger[@]}" next --need 20 --root "$D2K_ROOT" --task moe/sum_reduce "$WORK/cuda_failed.csv")" \
  "moe/sum_reduce 6 20" "next after a failure"
expect_eq "$("${ledger[@]}" next --need 1 --root "$D2K_ROOT" --task moe/sum_reduce "$WORK/cuda.csv")" "" \
  "next of a task that has its seeds"
echo "ok: next continues the run after the last failure, or starts one"

# A progress file from before the ledger (finished lines without a seed) is refused, not guessed at.
grep -v '"event":"run"' "$WORK/run.progress" | sed 's/,"seed":[0-9]*//' > "$WORK/old.progress"
expect_exit 1 "${ledger[@]}" extract --device cpu --gpu x --commit x --date x --source x "$WORK/old.progress"
echo "ok: an event without its seed is refused"
