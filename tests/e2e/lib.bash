# Shared by the end-to-end scripts: D2K, D2K_ROOT and WORK come from ctest (tests/CMakeLists.txt).
set -euo pipefail
: "${D2K:?}" "${D2K_ROOT:?}" "${WORK:?}"
rm -rf "$WORK" && mkdir -p "$WORK"
export D2K_CACHE_DIR="$WORK/cache"

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
  if [ "$got" != "$want" ]; then echo "FAIL: '$*' exited $got, expected $want" >&2; exit 1; fi
}
expect_eq() {
  if [ "$1" != "$2" ]; then echo "FAIL: $3: got '$1', expected '$2'" >&2; exit 1; fi
  echo "ok: $3 = $1"
}
