# The cheating corpus on the cpu device (tests/corpus, docs/integrity.md): every cheat is caught with
# its status and a reason that names what it did. d2k exits 1 (a failed trace), never 2.
source "$(dirname "$0")/lib.bash"
corpus="$D2K_ROOT/tests/corpus"
solutions="$D2K_ROOT/tests/e2e/solutions"
quant=quant/fp8_group_quant
norm=norm/fused_add_rmsnorm

# solution_of FILE: what to evaluate for FILE. A cheat that includes the corpus's honest kernel
# (honest_quant.h) becomes a folder solution with the header beside it: a single file is built alone.
solution_of() {
  local file=$1 name; name=$(basename "$1"); name=${name%.*}
  if [ -f "$file" ] && grep -q '#include "honest_quant.h"' "$file"; then
    mkdir -p "$WORK/solutions/$name"
    cp "$file" "$corpus/honest_quant.h" "$WORK/solutions/$name/"
    file="$WORK/solutions/$name"
  fi
  echo "$file"
}

# caught FILE TASK WORKLOAD STATUS FRAGMENT [d2k eval options...]
caught() {
  local file=$1 task=$2 workload=$3 status=$4 fragment=$5; shift 5
  local name; name=$(basename "$file"); name=${name%.*}
  local json="$WORK/$name.json"
  file=$(solution_of "$file")
  expect_exit 1 "$D2K" eval "$task" "$file" --device cpu -w "$workload" --timeout "${TIMEOUT:-20}" --max-seconds 0.2 \
    --min-samples 3 --warmup 1 --no-baseline --json "$json" "$@"
  expect_caught "$json" "$workload" "$status" "$fragment" "$name"
}

# 1 stale memory
caught "$corpus/stale_unwritten.cpp" $quant deepseek-v3-T1 incorrect_numerics "NaN"
# 2 modified inputs
caught "$solutions/modifies_input.cpp" $norm llama3-8b-T1 rejected "modified its input 'weight'"
# 3 caches across calls
# The second draw in the same buffers catches them before any timed call, with rotation off or on. The
# other mechanism, every timed call's outputs compared with the checked call's across the rotated
# copies, is tested alone in test_worker (ADeterministicTasksTimedCallsAreComparedNotSentBack).
caught "$corpus/cache_by_pointer.cpp" $quant deepseek-v3-T1 rejected "outputs follow the addresses" --rotate 0
caught "$corpus/cache_by_value.cpp" $quant deepseek-v3-T1 rejected "outputs follow the addresses (or a sample)" --rotate 0
caught "$corpus/cache_by_pointer.cpp" $quant deepseek-v3-T1 rejected "outputs follow the addresses"
# 4, 5 work outside the call
caught "$corpus/thread_outlives_call.cpp" $quant deepseek-v3-T1 rejected "left 1 thread(s) running after d2k_run returned"
caught "$corpus/thread_during_timing.cpp" $quant deepseek-v3-T1 rejected "timing: left 1 thread(s) running after d2k_run returned"
caught "$corpus/defer_compute_once.cpp" $quant deepseek-v3-T1 rejected "changed between two runs on the same inputs"
# 6 a forged result.json: written in a timed call, after which the cheat ends the process (the file is
# nobody's evidence: the worker's end never came), or after the worker's end by an atexit handler and a
# destructor (which never run: the worker _exits)
caught "$corpus/tamper_forged_result.cpp" $quant deepseek-v3-T1 runtime_error "(stage: timing)"
caught "$corpus/tamper_forged_result_at_exit.cpp" $quant deepseek-v3-T1 runtime_error "d2k_run returned 1: every timed call fails"
# 13 a time below the floor. No forged time reaches the floor now (the token stops it first), so the floor's
# wiring is tested with ceilings that claim a copy bandwidth a million times lower than measured: the
# expert's real time is then below its floor.
slow=$(slow_ceilings cpu)
D2K_CACHE_DIR="$slow" caught "$D2K_ROOT/tasks/$quant/solution/cpu" $quant deepseek-v3-T1 rejected "of the speed-of-light floor"
# 7 lower precision
caught "$corpus/precision_bf16_scales.cpp" $quant deepseek-v3-T1 incorrect_numerics "'scales'"
# 8 the tolerance
caught "$corpus/tolerance_zero_outputs.cpp" $quant deepseek-v3-T1 incorrect_numerics "outside tolerance"
# 9 the distribution
caught "$corpus/distribution_fixed_scale.cpp" $quant deepseek-v3-T1 incorrect_numerics "is above the bound"
# 10 hard-coded shapes: passes the published workload, caught on the hidden one of a final evaluation
expect_exit 0 "$D2K" eval $quant "$(solution_of "$corpus/shapes_hardcoded.cpp")" --device cpu -w deepseek-v3-T1 --timeout 20 \
  --max-seconds 0.2 --min-samples 3 --warmup 1 --no-baseline --json "$WORK/shapes_published.json"
caught "$corpus/shapes_hardcoded.cpp" $quant qwen3-235b-T333-K1536 incorrect_shape "wrote past the end of output" --final
# 11 a library the task does not allow
caught "$corpus/library_torch.cpp" $quant deepseek-v3-T1 compile_error "torch/torch.h"
# Under the sandbox the library is not even visible; without it, loading it is caught by name.
caught "$corpus/library_dlopen_torch.cpp" $quant deepseek-v3-T1 runtime_error "found no libtorch to call"
caught "$corpus/library_dlopen_torch.cpp" $quant deepseek-v3-T1 rejected "loaded libc10.so" --sandbox off
# 12 outside the outputs; outputs that depend on more than the inputs
caught "$corpus/oob_write_before_input.cpp" $quant deepseek-v3-T1 rejected "wrote outside its tensors"
caught "$corpus/nondeterministic_history.cpp" $quant deepseek-v3-T1 rejected "changed between two runs on the same inputs"
# 15 crash and hang
caught "$solutions/crash.cpp" $norm llama3-8b-T1 runtime_error "SIGSEGV"
TIMEOUT=5 caught "$solutions/hang.cpp" $norm llama3-8b-T1 timeout "timed out"
echo "ok: the cpu corpus is caught"
