# Each failure kind yields exactly its status, on two workloads, and d2k itself goes on to the end
# (exit code 1: a failed trace, not 2: a harness error).
source "$(dirname "$0")/lib.bash"
task=norm/fused_add_rmsnorm
solutions="$D2K_ROOT/tests/e2e/solutions"

check_kind() {  # solution expected-status [message fragment] [workloads...]
  local name=$1 status=$2 fragment=${3:-}; shift 3 || shift $#
  local workloads=("${@:-llama3-8b-T1}")
  [ $# -gt 0 ] || workloads=(llama3-8b-T1 llama3-8b-T2048)
  local json="$WORK/$name.json" args=()
  for w in "${workloads[@]}"; do args+=(-w "$w"); done
  expect_exit 1 "$D2K" eval $task "$solutions/$name.cpp" --device cpu "${args[@]}" \
    --timeout 10 --max-seconds 0.2 --min-samples 3 --warmup 1 --json "$json"
  for w in "${workloads[@]}"; do
    expect_eq "$(status_of "$json" "$w")" "$status" "$name on $w"
  done
  if [ -n "$fragment" ]; then
    case "$(message_of "$json" llama3-8b-T1)" in *"$fragment"*) echo "ok: message names '$fragment'";;
      *) echo "FAIL: $name: message lacks '$fragment': $(message_of "$json" llama3-8b-T1)" >&2; exit 1;; esac
  fi
}

check_kind compile_error compile_error ""
check_kind crash runtime_error "SIGSEGV"
check_kind reports_error runtime_error "unsupported hidden size"
check_kind hang timeout ""
check_kind wrong_answer incorrect_numerics ""
check_kind modifies_input rejected "modified its input 'weight'"
# Only on one row: the float32 writes of a longer output would run far past its guard region.
check_kind wrong_dtype incorrect_dtype "f32" llama3-8b-T1
