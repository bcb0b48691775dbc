# The cheating corpus on the cuda device (tests/corpus/*_cuda.cu, docs/integrity.md): GPU-specific
# tricks, each caught with its status and reason, or (work on another stream) charged its real time.
# ONLY="name ..." runs those entries alone: corpus file names without the extension (honest_quant_cuda and
# timer_other_stream_cuda run together), or "triton" for the Triton section; a name that matches nothing is a
# failure. The closing bench runs only in a full run.
source "$(dirname "$0")/lib.bash"
corpus="$D2K_ROOT/tests/corpus"
quant=quant/fp8_group_quant

# wanted NAME...: whether the section of these names runs (ONLY unset, or it names one of them).
declare -A only_matched=()
wanted() {
  [ -z "${ONLY:-}" ] && return 0
  local name found=1
  for name; do [[ " $ONLY " == *" $name "* ]] && only_matched[$name]=1 && found=0; done
  return $found
}

# run_eval FILE WORKLOAD EXIT [d2k eval options...]: evaluates into $WORK/<name>.json
run_eval() {
  local file=$1 workload=$2 code=$3; shift 3
  local name; name=$(basename "$file"); name=${name%.*}
  expect_exit "$code" "$D2K" eval $quant "$(corpus_solution "$file")" --device cuda -w "$workload" --timeout 60 --no-baseline \
    --json "$WORK/$name.json" "$@"
}
caught() {  # FILE WORKLOAD STATUS FRAGMENT
  local name; name=$(basename "$1"); name=${name%.*}
  wanted "$name" || return 0
  run_eval "$1" "$2" 1
  expect_caught "$WORK/$name.json" "$2" "$3" "$4" "$name"
}

big=deepseek-v3-T4096
caught "$corpus/stale_device_memory_cuda.cu" $big incorrect_numerics "element"
caught "$corpus/cache_by_pointer_cuda.cu" $big rejected "outputs follow the addresses"
caught "$corpus/thread_outlives_call_cuda.cu" $big rejected "left 1 thread(s) running after d2k_run returned"
caught "$corpus/library_cublas_cuda.cu" $big runtime_error "undefined symbol"
caught "$corpus/tamper_forged_result_cuda.cu" $big runtime_error "(stage: timing)"

# The second round (tests/corpus/ROUND2.md, issue 10).
timed="every timed call must compute its own outputs"
caught "$corpus/replay_call_count_cuda.cu" $big rejected "$timed"
caught "$corpus/scan_device_memory_cuda.cu" $big rejected "$timed"
# Its slowed host clocks reach CUPTI's own timestamps too (libcupti's clock_gettime slot is patched like
# the rest), so the second clock's windows drift off the calls and its kernels show between them.
caught "$corpus/patch_clock_got_cuda.cu" $big rejected "kernels outside its calls"
caught "$corpus/graph_capture_left_on_cuda.cu" $big rejected "capturing a graph"
caught "$corpus/graph_capture_replay_cuda.cu" $big rejected "capturing a graph"
caught "$corpus/persisting_l2_cuda.cu" deepseek-v3-T1 rejected "persisting-L2 limit"
caught "$corpus/persisting_l2_driver_cuda.cu" deepseek-v3-T1 rejected "persisting-L2 limit"
# Its context comes with a thread of the driver's that outlives d2k_prepare: that is what the worker sees
# first (H200, 2026-12-01).
caught "$corpus/spin_second_context_cuda.cu" $big rejected "thread(s) running after d2k_prepare returned"
caught "$corpus/mapped_host_thread_cuda.cu" deepseek-v3-T1 rejected "thread(s) running"
name=spin_second_stream_cuda
if wanted $name; then
  expect_exit 1 "$D2K" eval $quant "$(corpus_solution "$corpus/$name.cu")" --device cuda -w $big --timeout 5 --no-baseline \
    --json "$WORK/$name.json"
  expect_caught "$WORK/$name.json" $big timeout "timed out" $name
fi
# Frames written from the solution's code never reach the evidence pipe: it computes honestly, and passes.
if wanted forge_frames_release_cuda; then
  run_eval "$corpus/forge_frames_release_cuda.cu" $big 0
  case "$(log_of "$WORK/forge_frames_release_cuda.json" $big)" in
    *"a write to fd 1001 was refused: Operation not permitted"*) echo "ok: forge_frames_release_cuda: its frames were refused";;
    *) echo "FAIL: forge_frames_release_cuda: its log does not show its frames refused" >&2; exit 1;;
  esac
fi

# Work hidden on another stream passes, but is charged: its median is not below the same kernel's
# median on the call's stream (a 20% allowance for noise).
if wanted honest_quant_cuda timer_other_stream_cuda; then
  run_eval "$corpus/honest_quant_cuda.cu" $big 0
  run_eval "$corpus/timer_other_stream_cuda.cu" $big 0
  honest=$(median_of "$WORK/honest_quant_cuda.json" $big)
  hidden=$(median_of "$WORK/timer_other_stream_cuda.json" $big)
  python3 -c "import sys; h, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if c >= 0.8 * h else 1)" "$honest" "$hidden" \
    || { echo "FAIL: work on another stream timed at $hidden ms against $honest ms on the call's stream" >&2; exit 1; }
  echo "ok: work on another stream is charged: $hidden ms (same kernel on the call's stream: $honest ms)"
fi

# A time below the floor (no forged time reaches it: the frames' gate stops those first): ceilings that claim a
# memory bandwidths a million times lower than measured put the honest kernel's real time below its floor.
if wanted honest_below_floor_cuda; then
  slow=$(slow_ceilings cuda)
  cp "$corpus/honest_quant_cuda.cu" "$WORK/honest_below_floor_cuda.cu"
  D2K_CACHE_DIR="$slow" caught "$WORK/honest_below_floor_cuda.cu" $big rejected "with cold inputs no time under the floor is possible"
fi

# Triton solutions (issue 17; docs/integrity.md, "Triton solutions"), on norm/fused_add_rmsnorm: the shipped
# Triton solution passes; the library imports are refused (at the warm-up, before any worker); a cache on the
# buffers' addresses fails the timed calls' checks; a launch on another stream is charged its real time.
norm=norm/fused_add_rmsnorm
triton_eval() {  # FILE EXIT [d2k eval options...]: evaluates into $WORK/<name>.json
  local file=$1 code=$2; shift 2
  local name; name=$(basename "$file"); name=${name%.*}
  expect_exit "$code" "$D2K" eval $norm "$file" --device cuda -w llama3-8b-T2048 --timeout 120 --no-baseline \
    --json "$WORK/$name.json" "$@"
}
if wanted triton; then
  triton_eval "$D2K_ROOT/tasks/$norm/solution/triton" 0
  for cheat in torch numpy ctypes lazy_torch; do
    triton_eval "$corpus/library_${cheat}_triton.py" 1
    expect_caught "$WORK/library_${cheat}_triton.json" llama3-8b-T2048 rejected "imports '${cheat#lazy_}'" "library_${cheat}_triton"
  done
  triton_eval "$corpus/cache_by_pointer_triton.py" 1
  expect_caught "$WORK/cache_by_pointer_triton.json" llama3-8b-T2048 rejected "every timed call must compute its own outputs" cache_by_pointer_triton
  triton_eval "$corpus/other_stream_triton.py" 0
  echo "ok: the Triton corpus is caught and the Triton solution passes"
fi
if [ -n "${ONLY:-}" ]; then
  for name in $ONLY; do [ -n "${only_matched[$name]:-}" ] || fail_now "ONLY names '$name', which is no entry of corpus_gpu.sh"; done
  echo "ok: the entries of ONLY ($ONLY) ran"
  exit 0
fi

# The experts of the two tasks the corpus runs on pass (no false alarm from the thread count, the second
# draw, the repeat or the floor) on every workload, hidden ones included. Every expert's 20 seeds are the
# ledger's (docs/results/seeds/): a bench of all 26 here took past corpus.sh's 300 s on the H200.
expect_exit 0 "$D2K" bench -t $quant -t $norm --device cuda --no-baseline --json "$WORK/bench.json"
echo "ok: the GPU corpus is caught and the experts pass"
