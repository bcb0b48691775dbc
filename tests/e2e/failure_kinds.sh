# Each failure kind yields exactly its status, on two workloads, and d2k itself goes on to the end
# (exit code 1: a failed trace, not 2: a harness error).
source "$(dirname "$0")/lib.sh"
task=norm/fused_add_rmsnorm
solutions="$D2K_ROOT/tests/e2e/solutions"

check_kind() {  # solution expected-status [message fragment]
  local json="$WORK/$1.json"
  expect_exit 1 "$D2K" eval $task "$solutions/$1.cpp" --device cpu -w llama3-8b-T1 -w llama3-70b-T1 \
    --timeout 10 --max-seconds 0.2 --json "$json"
  for w in llama3-8b-T1 llama3-70b-T1; do
    expect_eq "$(status_of "$json" $w)" "$2" "$1 on $w"
  done
  if [ -n "${3:-}" ]; then
    case "$(message_of "$json" llama3-8b-T1)" in *"$3"*) echo "ok: message names '$3'";;
      *) echo "FAIL: $1: message lacks '$3': $(message_of "$json" llama3-8b-T1)" >&2; exit 1;; esac
  fi
}

check_kind compile_error compile_error
check_kind crash runtime_error "SIGSEGV"
check_kind reports_error runtime_error "unsupported hidden size"
check_kind hang timeout
check_kind wrong_answer incorrect_numerics
check_kind wrong_dtype incorrect_dtype "f32"
