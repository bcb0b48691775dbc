# The whole pipeline on the cpu device: `d2k bench` runs every task's cpu solution on its smoke
# workloads (every task under tasks/, so a new task is covered without editing this script), says so
# once, and every trace passes; `d2k tasks` lists and shows them.
source "$(dirname "$0")/lib.bash"
"$D2K" tasks
shown=$("$D2K" tasks norm/fused_add_rmsnorm --levels 1,2,3)
case "$shown" in *"## L3 execution"*) echo "ok: guidance rendered";; *) echo "FAIL: no L3 guidance in: $shown" >&2; exit 1;; esac
if ! "$D2K" bench --device cpu --max-seconds 0.2 --min-samples 3 --warmup 1 --json "$WORK/bench.json" \
     2> "$WORK/bench.err" | tee "$WORK/bench.txt"; then
  cat "$WORK/bench.err" >&2; exit 1
fi
cat "$WORK/bench.err" >&2
expect_eq "$(grep -c 'cpu device: the smoke workloads (' "$WORK/bench.err")" 1 "lines saying the cpu device runs the smoke tier"
python3 - "$WORK/bench.json" "$D2K_ROOT/tasks" "$WORK/bench.err" <<'PY'
import glob, json, os, re, sys, tomllib
d = json.load(open(sys.argv[1]))
smoke, total = set(), 0
for path in glob.glob(os.path.join(sys.argv[2], "*", "*", "task.toml")):
    task = os.path.relpath(os.path.dirname(path), sys.argv[2])
    workloads = tomllib.load(open(path, "rb"))["workloads"]
    total += len(workloads)  # bench runs hidden workloads too
    smoke |= {(task, w["name"]) for w in workloads if w.get("smoke")}
ran = {(t["task"], t["workload"]) for t in d["traces"]}
assert ran == smoke, ("the traces are not the smoke workloads", sorted(ran ^ smoke))
assert len({task for task, _ in smoke}) == len(glob.glob(os.path.join(sys.argv[2], "*", "*", "task.toml"))), "a task without smoke"
said = re.search(r"cpu device: the smoke workloads \((\d+) of (\d+)\)", open(sys.argv[3]).read())
assert said and (int(said[1]), int(said[2])) == (len(smoke), total), (said and said[0], len(smoke), total)
bad = [t for t in d["traces"] if t["status"] != "passed"]
assert not bad, [(t["task"], t["workload"], t["status"], t["message"]) for t in bad]
assert all(t["performance"]["solution"]["median_ms"] > 0 for t in d["traces"])
print(f"ok: {len(d['traces'])} smoke traces of {len({t for t, _ in smoke})} tasks passed ({said[0]})")
PY
