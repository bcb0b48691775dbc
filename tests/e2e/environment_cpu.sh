# The command line sets up only what a subcommand needs: `d2k ceilings` runs without the worker and the
# sandbox launcher beside it (eval then fails for want of them); `d2k eval` reads only the named task,
# so a broken task elsewhere in the tree does not stop it (while `d2k tasks` reports it); `eval --profile`
# refuses the cpu device.
source "$(dirname "$0")/lib.bash"
task=norm/fused_add_rmsnorm

# A d2k alone in a folder: no d2k-worker, no d2k-sandbox.
mkdir -p "$WORK/alone"
cp "$D2K" "$WORK/alone/d2k"
"$WORK/alone/d2k" ceilings --device cpu | tee "$WORK/ceilings.txt"
grep -Eq "\(cpu\): copy [0-9]+ GB/s" "$WORK/ceilings.txt" || { echo "FAIL: no ceilings line" >&2; exit 1; }
echo "ok: ceilings without worker or sandbox"
set +e; out=$("$WORK/alone/d2k" eval $task "$D2K_ROOT/tasks/$task/solution/cpu" --device cpu 2>&1); code=$?; set -e
expect_eq "$code" 2 "exit status of eval without a worker"
case "$out" in *"the worker executable is missing: $WORK/alone/d2k-worker"*) echo "ok: eval looks for the worker beside d2k";;
  *) echo "FAIL: eval without a worker said: $out" >&2; exit 1;; esac

# A tree with the task, the ABI header and a broken task.
root="$WORK/root"
mkdir -p "$root/tasks/norm" "$root/tasks/broken/garbage"
cp -r "$D2K_ROOT/include" "$root/include"
cp -r "$D2K_ROOT/tasks/$task" "$root/tasks/norm/"
echo "this is = not [ toml" > "$root/tasks/broken/garbage/task.toml"
expect_exit 2 "$D2K" --root "$root" tasks
"$D2K" --root "$root" eval $task "$root/tasks/$task/solution/cpu" --device cpu -w llama3-8b-T1 --max-seconds 0.05 \
  --min-samples 3 --warmup 1 --no-baseline --json "$WORK/one.json" > /dev/null
expect_eq "$(status_of "$WORK/one.json" llama3-8b-T1)" passed "eval beside a broken task"
set +e; out=$("$D2K" --root "$root" eval norm/nope "$root/tasks/$task/solution/cpu" --device cpu 2>&1); code=$?; set -e
expect_eq "$code" 2 "exit status of an unknown task"
case "$out" in *"no task 'norm/nope' (known: broken/garbage, norm/fused_add_rmsnorm)"*) echo "ok: unknown task named with the known ones";;
  *) echo "FAIL: unknown task said: $out" >&2; exit 1;; esac

# --profile (Nsight Compute on one workload) needs the cuda device and one named workload; on the cpu device
# it says so before running anything.
set +e; out=$("$D2K" eval $task "$D2K_ROOT/tasks/$task/solution/cpu" --device cpu --profile -w llama3-8b-T1 2>&1); code=$?; set -e
expect_eq "$code" 2 "exit status of --profile on the cpu device"
case "$out" in *"--profile needs the cuda device (Nsight Compute profiles GPU kernels); the device is cpu"*) echo "ok: --profile names the device it needs";;
  *) echo "FAIL: --profile on the cpu device said: $out" >&2; exit 1;; esac

# bench --build-only compiles the experts into the cache and stops (no worker run, no ceilings, no GPU):
# a second run finds each in the cache; an expert that does not compile is named with the compiler's
# message and exit status 1, the others still built.
broot="$WORK/build-root"
mkdir -p "$broot/tasks/norm" "$broot/tasks/moe"
cp -r "$D2K_ROOT/include" "$broot/include"
cp -r "$D2K_ROOT/tasks/$task" "$broot/tasks/norm/"
cp -r "$D2K_ROOT/tasks/moe/sum_reduce" "$broot/tasks/moe/"
build_only() { D2K_CACHE_DIR="$WORK/build-cache" "$D2K" --root "$broot" bench --build-only "$@"; }
out=$(build_only --device cpu)
expect_eq "$(grep -Ec '^(moe/sum_reduce|norm/fused_add_rmsnorm) \(cpu\): built in [0-9.]+ s, cache entry [0-9a-f]{64}$' <<< "$out")" 2 "experts built"
entry=$(awk '/^norm\/fused_add_rmsnorm/ {print $NF}' <<< "$out")
[ -f "$WORK/build-cache/builds/$entry/solution.so" ] || fail_now "no solution.so in the named cache entry: $out"
expect_eq "$(build_only --device cpu | grep -c ': in the cache in ')" 2 "experts found in the cache"
echo '#error this expert is broken on purpose' >> "$broot/tasks/moe/sum_reduce/solution/cpu/$(ls "$broot/tasks/moe/sum_reduce/solution/cpu" | grep -m1 '\.cpp$')"
set +e; out=$(build_only --device cpu); code=$?; set -e
expect_eq "$code" 1 "exit status of a build-only run with a broken expert"
case "$out" in *"moe/sum_reduce (cpu): FAILED in "*"broken on purpose"*"1 of 2 expert builds ok"*) echo "ok: the broken expert named with the compiler's message";;
  *) fail_now "a broken expert's build-only run said: $out";; esac
# A named cuda device is not probed: without a GPU the builds still run (and fail only where nvcc is missing).
set +e; out=$(build_only --device cuda -t norm/fused_add_rmsnorm 2>&1); code=$?; set -e
case "$code:$out" in 0:*"norm/fused_add_rmsnorm (cuda): built in "*|1:*"norm/fused_add_rmsnorm (cuda): FAILED"*) echo "ok: build-only on cuda needs no GPU (exit $code)";;
  *) fail_now "build-only on cuda exited $code: $out";; esac
