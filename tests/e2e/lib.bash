# Shared by the end-to-end scripts: D2K, D2K_ROOT and WORK come from ctest (tests/CMakeLists.txt).
set -euo pipefail
: "${D2K:?}" "${D2K_ROOT:?}" "${WORK:?}"
rm -rf "$WORK" && mkdir -p "$WORK"
export D2K_CACHE_DIR="$WORK/cache"

# fail_now MESSAGE: a failed expectation. Ends the script, or with KEEP_GOING set (a GPU run, where a
# second call costs minutes) counts it and goes on; the script then exits 1 at its end.
D2K_FAILURES=0
fail_now() {
  echo "FAIL: $*" >&2
  [ -n "${KEEP_GOING:-}" ] || exit 1
  D2K_FAILURES=$((D2K_FAILURES + 1))
}
trap 'if [ "$D2K_FAILURES" != 0 ]; then echo "$D2K_FAILURES expectation(s) failed" >&2; exit 1; fi' EXIT

# status_of FILE WORKLOAD: the status of that workload's trace in a --json file.
status_of() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(t["status"] for t in d["traces"] if t["workload"]==sys.argv[2]))' "$1" "$2"
}
message_of() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(t["message"] for t in d["traces"] if t["workload"]==sys.argv[2]))' "$1" "$2"
}
# expect_exit CODE COMMAND...: runs COMMAND, fails unless it exits with CODE.
expect_exit() {
  local want=$1; shift
  set +e; "$@"; local got=$?; set -e
  if [ "$got" != "$want" ]; then fail_now "'$*' exited $got, expected $want"; fi
}
expect_eq() {
  if [ "$1" != "$2" ]; then fail_now "$3: got '$1', expected '$2'"; return 0; fi
  echo "ok: $3 = $1"
}
log_of() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(t["log"] for t in d["traces"] if t["workload"]==sys.argv[2]))' "$1" "$2"
}
median_of() {  # FILE WORKLOAD: the solution's median time in ms
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(t["performance"]["solution"]["median_ms"] for t in d["traces"] if t["workload"]==sys.argv[2]))' "$1" "$2"
}
# expect_caught FILE WORKLOAD STATUS FRAGMENT NAME: the trace has the status, and its message (or, for
# a compile error, its log) contains the fragment.
expect_caught() {
  local json=$1 workload=$2 status=$3 fragment=$4 name=$5 text
  expect_eq "$(status_of "$json" "$workload")" "$status" "$name on $workload"
  text="$(message_of "$json" "$workload") $(log_of "$json" "$workload")"
  case "$text" in *"$fragment"*) echo "ok: $name: reason names '$fragment': $(message_of "$json" "$workload")";;
    *) fail_now "$name: reason lacks '$fragment': $(message_of "$json" "$workload")";; esac
}
# slow_ceilings DEVICE: prints a cache folder whose ceilings claim copy and read bandwidths 10^6 x lower than
# the ones measured into $WORK/cache: an honest kernel's real time is then below its speed-of-light floor.
slow_ceilings() {
  local slow="$WORK/slow-cache"
  mkdir -p "$slow"
  python3 - "$WORK/cache" "$slow" "$1" <<'PY'
import glob, json, os, sys
cache, slow, device = sys.argv[1:]
[measured] = glob.glob(os.path.join(cache, f"ceilings-{device}-*.json"))
ceilings = json.load(open(measured))
ceilings["copy_gbps"] /= 1e6
ceilings["read_gbps"] /= 1e6
# ... and a memory bus of one bit at 1 MHz, so the device's bound (which rejects) is as slow as the rates.
if ceilings.get("memory_bus_bits"):
    ceilings["memory_bus_bits"] = ceilings["memory_max_mhz"] = 1
json.dump(ceilings, open(os.path.join(slow, os.path.basename(measured)), "w"))
PY
  echo "$slow"
}

# corpus_headers FILE: the corpus headers (tests/corpus/*.h, *.cuh) FILE includes, directly or through
# another corpus header.
corpus_headers() {
  local corpus="$D2K_ROOT/tests/corpus" todo=("$1") seen=" " file header
  while [ ${#todo[@]} -gt 0 ]; do
    file=${todo[0]}; todo=("${todo[@]:1}")
    for header in $(sed -n 's/^#include "\([^"/]*\)".*/\1/p' "$file"); do
      [ -f "$corpus/$header" ] || continue
      case "$seen" in *" $header "*) continue;; esac
      seen="$seen$header "; todo+=("$corpus/$header"); echo "$header"
    done
  done
}

# corpus_solution FILE: what to evaluate for a corpus cheat. One that includes corpus headers becomes a
# folder solution with them beside it (a single file is built alone).
corpus_solution() {
  local file=$1 name headers; name=$(basename "$1"); name=${name%.*}
  headers=$(corpus_headers "$file")
  if [ -f "$file" ] && [ -n "$headers" ]; then
    mkdir -p "$WORK/solutions/$name"
    cp "$file" "$WORK/solutions/$name/"
    for header in $headers; do cp "$D2K_ROOT/tests/corpus/$header" "$WORK/solutions/$name/"; done
    file="$WORK/solutions/$name"
  fi
  echo "$file"
}
