# Threat 14 and 15 on the cuda device: the sandbox corpus with the expert CUDA d2k_run (network,
# files, secrets, processes) under the strict sandbox, with the driver reached through the sandbox's
# /dev and /sys; then a kernel that never ends: a timeout trace, and the next workload passes on the
# same GPU.
source "$(dirname "$0")/lib.bash"
task=norm/fused_add_rmsnorm
corpus="$D2K_ROOT/tests/corpus"
expert="$D2K_ROOT/tasks/$task/solution/cuda/fused_add_rmsnorm.cu"
ext=cu device=cuda
source "$(dirname "$0")/sandbox_lib.bash"

# The expert itself passes in the sandbox: the CUDA driver works inside it.
expect_eval expert "$expert" strict passed
expect_log_has expert strict "d2k-sandbox: "

run_corpus

hang="$WORK/solutions/gpu_hang"
mkdir -p "$hang" && cp "$expert" "$hang/" && cp "$corpus/sandbox_gpu_hang.cu" "$hang/"
json="$WORK/gpu_hang.json"
expect_exit 1 "$D2K" eval $task "$hang" --device cuda -w llama3-8b-T1 -w llama3-8b-T2048 --timeout 20 \
  --max-seconds 0.2 --min-samples 3 --warmup 1 --no-baseline --json "$json"
expect_eq "$(status_of "$json" llama3-8b-T1)" timeout "a kernel that never ends"
expect_eq "$(status_of "$json" llama3-8b-T2048)" passed "the next workload, on the same GPU"
no_leftovers
