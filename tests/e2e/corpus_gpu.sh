# The cheating corpus on the cuda device (tests/corpus/*_cuda.cu, docs/integrity.md): GPU-specific
# tricks, each caught with its status and reason, or (work on another stream) charged its real time.
source "$(dirname "$0")/lib.bash"
corpus="$D2K_ROOT/tests/corpus"
quant=quant/fp8_group_quant

# solution_of FILE: what to evaluate for FILE. A cheat that includes the corpus's honest kernel
# (honest_quant_cuda.cuh) becomes a folder solution with the header beside it: a single file is built alone.
solution_of() {
  local file=$1 name; name=$(basename "$1"); name=${name%.*}
  if grep -q '#include "honest_quant_cuda.cuh"' "$file"; then
    mkdir -p "$WORK/solutions/$name"
    cp "$file" "$corpus/honest_quant_cuda.cuh" "$WORK/solutions/$name/"
    file="$WORK/solutions/$name"
  fi
  echo "$file"
}

# run_eval FILE WORKLOAD EXIT [d2k eval options...]: evaluates into $WORK/<name>.json
run_eval() {
  local file=$1 workload=$2 code=$3; shift 3
  local name; name=$(basename "$file"); name=${name%.*}
  expect_exit "$code" "$D2K" eval $quant "$(solution_of "$file")" --device cuda -w "$workload" --timeout 60 --no-baseline \
    --json "$WORK/$name.json" "$@"
}
caught() {  # FILE WORKLOAD STATUS FRAGMENT
  local name; name=$(basename "$1"); name=${name%.*}
  run_eval "$1" "$2" 1
  expect_caught "$WORK/$name.json" "$2" "$3" "$4" "$name"
}

big=deepseek-v3-T4096
caught "$corpus/stale_device_memory_cuda.cu" $big incorrect_numerics "element"
caught "$corpus/cache_by_pointer_cuda.cu" $big rejected "outputs follow the addresses"
caught "$corpus/thread_outlives_call_cuda.cu" $big rejected "left 1 thread(s) running after d2k_run returned"
caught "$corpus/library_cublas_cuda.cu" $big runtime_error "undefined symbol"
caught "$corpus/tamper_forged_result_cuda.cu" $big runtime_error "(stage: timing)"

# Work hidden on another stream passes, but is charged: its median is not below the same kernel's
# median on the call's stream (a 20% allowance for noise).
run_eval "$corpus/honest_quant_cuda.cu" $big 0
run_eval "$corpus/timer_other_stream_cuda.cu" $big 0
honest=$(median_of "$WORK/honest_quant_cuda.json" $big)
hidden=$(median_of "$WORK/timer_other_stream_cuda.json" $big)
python3 -c "import sys; h, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if c >= 0.8 * h else 1)" "$honest" "$hidden" \
  || { echo "FAIL: work on another stream timed at $hidden ms against $honest ms on the call's stream" >&2; exit 1; }
echo "ok: work on another stream is charged: $hidden ms (same kernel on the call's stream: $honest ms)"

# A time below the floor (no forged time reaches it: the token stops those first): ceilings that claim a
# copy bandwidth a million times lower than measured put the honest kernel's real time below its floor.
slow=$(slow_ceilings cuda)
cp "$corpus/honest_quant_cuda.cu" "$WORK/honest_below_floor_cuda.cu"
D2K_CACHE_DIR="$slow" caught "$WORK/honest_below_floor_cuda.cu" $big rejected "with cold inputs no time under the floor is possible"

# The expert passes (no false alarm from the thread count, the second draw, the repeat or the floor)
# on every workload, hidden ones included.
expect_exit 0 "$D2K" bench --device cuda --no-baseline --json "$WORK/bench.json"
echo "ok: the GPU corpus is caught and the experts pass"
