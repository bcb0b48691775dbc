# Adding a task: `d2k tasks --check` passes on the shipped tasks (CI runs this on tasks/, so a new task
# must pass it); `d2k new-task` scaffolds a folder whose check lists what is left to do, whose stubs
# build and fail at run time saying so; a broken task.toml is reported with its file and field.
source "$(dirname "$0")/lib.bash"

expect_exit 0 "$D2K" tasks --check
count=$(find "$D2K_ROOT/tasks" -mindepth 2 -maxdepth 2 -type d | wc -l)
expect_eq "$("$D2K" tasks --check | tail -1)" "$count tasks checked: no problem" "the check of tasks/"
expect_eq "$("$D2K" tasks --check norm/fused_add_rmsnorm)" "1 task checked: no problem" "the check of one task"
expect_exit 2 "$D2K" tasks --check nope/nothing

# A tree of its own, so that nothing is written under tasks/.
tree="$WORK/tree"
mkdir -p "$tree/tasks"
expect_exit 0 "$D2K" --root "$tree" new-task demo/fresh
fresh="$tree/tasks/demo/fresh"
expect_exit 2 "$D2K" --root "$tree" new-task demo/fresh
expect_exit 2 "$D2K" --root "$tree" new-task Demo/Fresh 2> "$WORK/bad_name.txt"
grep -q "'Demo/Fresh' is not a task name" "$WORK/bad_name.txt" || { echo "FAIL: $(cat "$WORK/bad_name.txt")" >&2; exit 1; }
echo "ok: a bad name is refused"
expect_exit 1 "$D2K" --root "$tree" tasks --check
"$D2K" --root "$tree" tasks --check > "$WORK/fresh.txt" || true
cat "$WORK/fresh.txt"
for line in \
  "$fresh/task.toml: summary = \"TODO: one line on what fresh computes (dtypes)\": still the scaffold's placeholder; replace it" \
  "$fresh/task.toml: workloads[0].name = \"TODO-model-T7\": still the scaffold's placeholder; replace it" \
  "$fresh/guidance.md: L2.3: still the scaffold's placeholder (TODO); write the item" \
  "$fresh/reference.cpp: D2K_REGISTER_TASK: no reference code is registered as 'demo/fresh' in this d2k" \
  "$fresh/solution/cuda/fresh.cu: still the stub d2k new-task wrote" \
  "$fresh/solution/cpu/fresh.cpp: still the stub d2k new-task wrote" \
  "$fresh/notes.md: ## Profile: still the scaffold's placeholder (TODO)" \
  "1 task checked: 31 problems in 1 task"; do
  grep -qF -- "$line" "$WORK/fresh.txt" || { echo "FAIL: the check of a scaffolded task lacks: $line" >&2; exit 1; }
done
echo "ok: the scaffolded task's check lists what is left to do"

# The cpu stub builds and fails at run time, through the whole pipeline (on a shipped task's workload).
expect_exit 1 "$D2K" eval norm/fused_add_rmsnorm "$fresh/solution/cpu" --device cpu -w llama3-8b-T1 --timeout 20 \
  --max-seconds 0.1 --min-samples 2 --warmup 0 --no-baseline --json "$WORK/stub.json"
expect_caught "$WORK/stub.json" llama3-8b-T1 runtime_error "demo/fresh: solution/cpu is not written yet" "the cpu stub"
if command -v nvcc > /dev/null; then
  nvcc -c -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "$D2K_ROOT/include" "$fresh/solution/cuda/fresh.cu" \
    -o "$WORK/fresh_cuda.o"
  echo "ok: the cuda stub builds"
else
  echo "skip: no nvcc, the cuda stub is not built"
fi
# The reference stub compiles as CMake would compile it in tasks/ (the build's own command line for a
# shipped reference.cpp, pointed at the stub).
python3 - "$(dirname "$(dirname "$D2K")")/compile_commands.json" "$D2K_ROOT/tasks/moe/topk_softmax/reference.cpp" \
  "$fresh/reference.cpp" <<'PY'
import json, os, shlex, subprocess, sys
database, shipped, stub = sys.argv[1:]
if not os.path.exists(database):
    print(f"skip: no {database}, the reference stub is not compiled"); sys.exit(0)
entry = next(e for e in json.load(open(database)) if os.path.realpath(e["file"]) == os.path.realpath(shipped))
args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
if os.path.basename(args[0]) == "ccache": args = args[1:]
out, skip = [], 0
for a in args:
    if skip: skip -= 1; continue
    if a in ("-o", "-MF", "-MT", "-c"): skip = a != "-c"; continue
    if a in ("-MD", entry["file"]) or os.path.realpath(a) == os.path.realpath(shipped): continue
    out.append(a.replace('"moe/topk_softmax"', '"demo/fresh"'))
subprocess.run(out + ["-fsyntax-only", stub], cwd=entry["directory"], check=True)
print("ok: the reference stub compiles")
PY

# A broken task.toml, in copies of shipped tasks: the check names the file, the line and the field.
mkdir -p "$tree/tasks/moe" "$tree/tasks/norm"
cp -r "$D2K_ROOT/tasks/moe/topk_softmax" "$tree/tasks/moe/"
cp -r "$D2K_ROOT/tasks/norm/fused_add_rmsnorm" "$tree/tasks/norm/"
rm -rf "$fresh"
sed -i '0,/smoke = true/s//smoke = "yes"/' "$tree/tasks/moe/topk_softmax/task.toml"
sed -i '1i name = "norm/fused_add_rmsnorm"' "$tree/tasks/norm/fused_add_rmsnorm/task.toml"
expect_exit 1 "$D2K" --root "$tree" tasks --check
"$D2K" --root "$tree" tasks --check > "$WORK/broken.txt" || true
cat "$WORK/broken.txt"
grep -Eq "^$tree/tasks/moe/topk_softmax/task.toml:[0-9]+: workloads\[[0-9]+\]\.smoke = \"yes\": must be true or false$" \
  "$WORK/broken.txt" || { echo "FAIL: the bad smoke field is not reported" >&2; exit 1; }
echo "ok: a bad field is reported with its file, line and field"
grep -qF "$tree/tasks/norm/fused_add_rmsnorm/task.toml:1: name: a task's name comes from its folder ('norm/fused_add_rmsnorm'); delete this line" \
  "$WORK/broken.txt" || { echo "FAIL: the name line is not reported" >&2; exit 1; }
echo "ok: a leftover name line is reported"
expect_eq "$(tail -1 "$WORK/broken.txt")" "2 tasks checked: 2 problems in 2 tasks" "the summary"
