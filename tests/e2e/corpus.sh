# The cheating corpus on the cpu device (tests/corpus, docs/integrity.md): every cheat is caught with
# its status and a reason that names what it did. d2k exits 1 (a failed trace), never 2.
source "$(dirname "$0")/lib.bash"
corpus="$D2K_ROOT/tests/corpus"
solutions="$D2K_ROOT/tests/e2e/solutions"
quant=quant/fp8_group_quant
norm=norm/fused_add_rmsnorm

# caught FILE TASK WORKLOAD STATUS FRAGMENT [d2k eval options...]
caught() {
  local file=$1 task=$2 workload=$3 status=$4 fragment=$5; shift 5
  local name; name=$(basename "$file"); name=${name%.*}
  local json="$WORK/$name.json"
  file=$(corpus_solution "$file")
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
# other mechanism, every timed call on inputs patched for it with a few calls' outputs checked against
# their own oracles, is tested alone in test_worker (AReplayOfAnEarlierCallLeavesTheTimedCallsOutputsWrong).
caught "$corpus/cache_by_pointer.cpp" $quant deepseek-v3-T1 rejected "outputs follow the addresses" --rotate 0
caught "$corpus/cache_by_value.cpp" $quant deepseek-v3-T1 rejected "outputs follow the addresses (or a sample)" --rotate 0
caught "$corpus/cache_by_pointer.cpp" $quant deepseek-v3-T1 rejected "outputs follow the addresses"
# 4, 5 work outside the call
caught "$corpus/thread_outlives_call.cpp" $quant deepseek-v3-T1 rejected "left 1 thread(s) running after d2k_run returned"
caught "$corpus/thread_during_timing.cpp" $quant deepseek-v3-T1 rejected "timing: left 1 thread(s) running after d2k_run returned"
caught "$corpus/defer_compute_once.cpp" $quant deepseek-v3-T1 incorrect_numerics "7168 of 7168 elements are NaN"
# 6 a forged result.json: written in a timed call, after which the cheat ends the process (the file is
# nobody's evidence: the worker's end never came), or after the worker's end by an atexit handler and a
# destructor (which never run: the worker _exits)
caught "$corpus/tamper_forged_result.cpp" $quant deepseek-v3-T1 runtime_error "(stage: timing)"
caught "$corpus/tamper_forged_result_at_exit.cpp" $quant deepseek-v3-T1 runtime_error "d2k_run returned 1: every timed call fails"
# 13 a time below the floor. No forged time reaches the floor now (the token stops it first), so the floor's
# wiring is tested with ceilings that claim memory bandwidths a million times lower than measured: the
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
expect_exit 0 "$D2K" eval $quant "$(corpus_solution "$corpus/shapes_hardcoded.cpp")" --device cpu -w deepseek-v3-T1 --timeout 20 \
  --max-seconds 0.2 --min-samples 3 --warmup 1 --no-baseline --json "$WORK/shapes_published.json"
caught "$corpus/shapes_hardcoded.cpp" $quant qwen3-235b-T333-K1536 incorrect_shape "wrote past the end of output" --final
# 11 a library the task does not allow
caught "$corpus/library_torch.cpp" $quant deepseek-v3-T1 compile_error "torch/torch.h"
# Under the sandbox the library is not even visible; without it, loading it is caught by name.
caught "$corpus/library_dlopen_torch.cpp" $quant deepseek-v3-T1 runtime_error "found no libtorch to call"
caught "$corpus/library_dlopen_torch.cpp" $quant deepseek-v3-T1 rejected "loaded libc10.so" --sandbox off
# A Triton solution on the cpu device: it has no Triton backend, and says so before building anything. (The
# Triton cheats, tests/corpus/*_triton.py, need the cuda device; their import guard is tested without a
# GPU in test_runner, Triton.ALibraryImportIsRefused.)
caught "$D2K_ROOT/tasks/$norm/solution/triton" $norm llama3-8b-T1 compile_error "the cpu device has no Triton backend"
# 12 outside the outputs; outputs that depend on more than the inputs
caught "$corpus/oob_write_before_input.cpp" $quant deepseek-v3-T1 rejected "wrote outside its tensors"
caught "$corpus/nondeterministic_history.cpp" $quant deepseek-v3-T1 rejected "changed between two runs on the same inputs"
# 15 crash and hang
caught "$solutions/crash.cpp" $norm llama3-8b-T1 runtime_error "SIGSEGV"
TIMEOUT=5 caught "$solutions/hang.cpp" $norm llama3-8b-T1 timeout "timed out"

# The second round (tests/corpus/ROUND2.md, issue 10): what a determined cheater tries against evidence
# frames on a pipe, patched timed calls, seccomp and the outside clock.
# neutralized FILE TASK WORKLOAD FRAGMENT: the cheat computes honestly and its attack never reached the
# orchestrator: the trace passes with the honest time, and the log shows the attack refused.
neutralized() {
  local file=$1 task=$2 workload=$3 fragment=$4 name; name=$(basename "$file"); name=${name%.*}
  expect_exit 0 "$D2K" eval "$task" "$(corpus_solution "$file")" --device cpu -w "$workload" --timeout 20 \
    --max-seconds 0.2 --min-samples 3 --warmup 1 --no-baseline --json "$WORK/$name.json"
  case "$(log_of "$WORK/$name.json" "$workload")" in *"$fragment"*) echo "ok: $name: refused ('$fragment')";;
    *) echo "FAIL: $name: its log lacks '$fragment'" >&2; exit 1;; esac
}
refused="a write to fd 1001 was refused: Operation not permitted"  # the evidence channel (kEvidenceFd)
timed="every timed call must compute its own outputs"
# 16 forged evidence: no file is evidence; frames written from the solution's code never reach the pipe
# (seccomp lets only the worker's own instruction write there); what it skipped computing shows
caught "$corpus/forge_answer_files.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/forge_frames_at_exit.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/forge_frames_thread.cpp" $quant deepseek-v3-T1 rejected "left 1 thread(s) running"
neutralized "$corpus/forge_frames_release.cpp" $quant deepseek-v3-T1 "$refused"
neutralized "$corpus/forge_frames_in_call.cpp" $quant deepseek-v3-T1 "$refused"
neutralized "$corpus/forge_raw_bytes.cpp" $quant deepseek-v3-T1 "$refused"
caught "$corpus/cut_channels_close.cpp" $quant deepseek-v3-T1 runtime_error "close(1001) pipe"
caught "$corpus/cut_channels_dup2.cpp" $quant deepseek-v3-T1 runtime_error "dup2(/dev/null, 1001) pipe"
caught "$corpus/cut_channels_unshare_io_uring.cpp" $quant deepseek-v3-T1 runtime_error "io_uring_setup: Operation not permitted"
neutralized "$corpus/steal_control_stream.cpp" $quant deepseek-v3-T1 "stole 0 bytes"
# 6, 19 the token read from memory: useless without a way to write frames
neutralized "$corpus/token_scan_json.cpp" $quant deepseek-v3-T1 "$refused"
caught "$corpus/token_scan_takeover.cpp" $quant deepseek-v3-T1 runtime_error "(stage: timing)"
# 17 replays: every timed call runs on inputs patched for it; calls chosen after the fact are checked
caught "$corpus/replay_call_count.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/replay_workspace.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/replay_prepare.cpp" $quant deepseek-v3-T1 rejected "$timed"
# ... or by writing the inputs file in d2k_prepare (the second draw made the first's): the file is sealed
# against writes before the worker maps it, and no route to a writable view of it works
caught "$corpus/tamper_sealed_inputs.cpp" $quant deepseek-v3-T1 runtime_error "the sealed inputs file stayed read-only"
caught "$corpus/replay_sample_hash.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/replay_every_other.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/replay_first_row.cpp" $quant qwen3-235b-T333-K1536 rejected "$timed" --final
caught "$corpus/replay_first_4k.cpp" $quant qwen3-235b-T333-K1536 rejected "$timed" --final
# 19 the worker's memory and clocks: no expected bytes to overwrite; the outside clock
caught "$corpus/patch_expected_copy.cpp" $quant deepseek-v3-T1 rejected "$timed"
caught "$corpus/patch_clock_got.cpp" $quant deepseek-v3-T4096 rejected "its timer was not measuring the calls"
caught "$corpus/patch_clock_got_direct.cpp" $quant deepseek-v3-T4096 rejected "its timer was not measuring the calls"
# Before it rejects, the outside clock has the worker run again with new secrets (a stall of the host
# disagrees once): a forged clock disagrees in both runs.
python3 - "$WORK/patch_clock_got.json" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))["traces"][0]
assert any("the first run was rejected by the outside clock" in w for w in trace["warnings"]), trace["warnings"]
steps = [p["name"] for p in trace["phases"]]
assert steps.count("solution_timing") == 2, steps
print("ok: the forged clock disagreed in both runs")
PY
# 18 work outside the calls: seccomp refuses timers, handlers, processes; the kernel counts threads
caught "$corpus/outside_sigalrm.cpp" $quant deepseek-v3-T1 runtime_error "sigaction(SIGALRM): Operation not permitted"
caught "$corpus/outside_posix_timer.cpp" $quant deepseek-v3-T1 runtime_error "timer_create(SIGEV_THREAD): Operation not permitted"
caught "$corpus/outside_clone_vm.cpp" $quant deepseek-v3-T1 runtime_error "clone(CLONE_VM | SIGCHLD): Operation not permitted"
# The thread ends as soon as its tail of the work is done: on T1 that is microseconds, which the count
# after the call sometimes misses (little untimed work, caught or not). T333-K1536 leaves it hundreds of
# microseconds, and has the rotated copies the cheat needs to tell timed calls (T4096's set exceeds the
# cpu device's 64 MiB rotation budget: one set, the same addresses, so the cheat never starts).
caught "$corpus/outside_libc_pthread.cpp" $quant qwen3-235b-T333-K1536 rejected "timing: left 1 thread(s) running" --final
caught "$corpus/outside_raw_thread.cpp" $quant deepseek-v3-T1 rejected "left 1 thread(s) running"
caught "$corpus/outside_fork.cpp" $quant deepseek-v3-T1 runtime_error "fork: Operation not permitted"
# A hurried implementer's mistakes in the newer tasks (issue 11): each is wrong numerics, named by output.
caught "$corpus/wrong_silu_on_up_half.cpp" act/silu_and_mul qwen3-30b-T37 incorrect_numerics "'out'"
caught "$corpus/wrong_sum_reduce_bf16_accumulation.cpp" moe/sum_reduce deepseek-v3-T5-odd-H incorrect_numerics "'out'"
caught "$corpus/wrong_rmsnorm_residual_truncated.cpp" $norm qwen2.5-7b-T37 incorrect_numerics "not the exact result rounded to nearest even"
caught "$corpus/wrong_fp8_quant_without_eps.cpp" $quant deepseek-v3-T37-colmajor-ue8m0 incorrect_numerics "'scales'"
caught "$corpus/wrong_topk_ranks_fp32_probabilities.cpp" moe/topk_softmax qwen3-30b-T33-ties incorrect_numerics "'ids'"
caught "$corpus/wrong_rope_position_is_index.cpp" pos/rope_neox llama3-8b-T37 incorrect_numerics "'k'"
caught "$corpus/wrong_qk_norm_over_projection.cpp" attn/qk_norm_rope qwen3-30b-T37 incorrect_numerics "'k'"
caught "$corpus/wrong_rmsnorm_fp8_weight_after_quant.cpp" quant/rmsnorm_fp8_quant qwen2.5-7b-T37 incorrect_numerics "'dequant'"
caught "$corpus/wrong_silu_mul_fp8_scale_before_rounding.cpp" moe/silu_mul_fp8_quant deepseek-v3-T37-colmajor incorrect_numerics "'q': "
caught "$corpus/wrong_cache_padding_written.cpp" kv/rope_cache_write llama3-8b-T37-padded incorrect_numerics "'key_cache'"
caught "$corpus/wrong_cache_before_rotation.cpp" kv/rope_cache_write llama3-8b-T37-padded incorrect_numerics "'key_cache'"
caught "$corpus/wrong_prefill_unmasked_last_tile.cpp" attn/prefill_causal_gqa llama3-8b-B3-T120 incorrect_numerics "'lse'"
caught "$corpus/wrong_window_off_by_one.cpp" attn/prefill_sliding_window gpt-oss-B3-T210-W31 incorrect_numerics "'lse'"
caught "$corpus/wrong_merge_plus_inf_kept.cpp" attn/merge_states llama3-8b-N37-empty-heavy incorrect_numerics "'output': 16384 of 151552 elements are NaN or Inf"
caught "$corpus/wrong_decode_pages_contiguous.cpp" attn/decode_paged_gqa llama3-8b-B3-ctx1-37 incorrect_numerics "'lse'"
caught "$corpus/wrong_mla_value_columns.cpp" attn/decode_mla deepseek-v3-B3-ctx1-130 incorrect_numerics "'o'"
caught "$corpus/wrong_align_pads_with_token_count.cpp" moe/align_block_size qwen3-30b-T37 incorrect_numerics "'sorted_token_ids': entry 37 appears"
caught "$corpus/wrong_grouped_topk_weights_from_biased_scores.cpp" moe/grouped_topk deepseek-v3-T37 incorrect_numerics "'weights'"
caught "$corpus/wrong_cross_entropy_ignored_rows_counted.cpp" loss/cross_entropy llama3-8b-N37-V1000 incorrect_numerics "'logits'"
# samplers (issue 12): the `sample` check kind's support check and distribution test, and the repeat
sampler=sample/top_k_top_p
caught "$corpus/wrong_sampler_untruncated.cpp" $sampler smoke-B64-V515 incorrect_numerics "outside its allowed set"
caught "$corpus/wrong_sampler_ignores_seed.cpp" $sampler smoke-B64-V515 incorrect_numerics "ignore the seed"
caught "$corpus/wrong_sampler_argmax.cpp" $sampler smoke-B64-V515 incorrect_numerics "do not follow the distribution"
caught "$corpus/wrong_sampler_biased_argmax.cpp" $sampler smoke-B64-V515 incorrect_numerics "a bias toward the argmax"
caught "$corpus/wrong_sampler_call_counter.cpp" $sampler smoke-B64-V515 rejected "changed between two runs on the same inputs"
caught "$corpus/wrong_int8_gemm_bf16_scales.cpp" quant/int8_gemm llama3-8b-o-M19-N136 incorrect_numerics "'d'"
caught "$corpus/wrong_w4a16_gemm_zero7.cpp" quant/w4a16_gemm llama3-8b-o-M19-N136 incorrect_numerics "'y'"
caught "$corpus/wrong_fp8_block_gemm_scale_once.cpp" quant/fp8_block_gemm deepseek-v3-q_b-M19-N208 incorrect_numerics "'c'"
caught "$corpus/wrong_muon_x_times_b.cpp" optim/muon_newton_schulz gpt2-small-attn_c_proj-B2-64x64 incorrect_numerics "'x'"
# 15 a log that is not text: kept, its bad bytes replaced, the trace written
expect_exit 0 "$D2K" eval $quant "$(corpus_solution "$corpus/log_invalid_utf8.cpp")" --device cpu -w deepseek-v3-T1 \
  --timeout 20 --max-seconds 0.2 --min-samples 3 --warmup 1 --no-baseline --json "$WORK/log_invalid_utf8.json"
echo "ok: the cpu corpus is caught"
