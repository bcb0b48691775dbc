# The sandbox corpus runs shared by sandbox_cpu.sh and sandbox_gpu.sh: expects task, corpus, expert,
# ext (cpp or cu) and device. Each corpus entry is the task's expert d2k_run plus a d2k_prepare that
# tries one escape and reports an error if it worked.

log_of() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["traces"][0]["log"])' "$1"
}

# expect_eval NAME SOLUTION MODE STATUS [MESSAGE-FRAGMENT]
expect_eval() {
  local name=$1 solution=$2 mode=$3 want=$4 fragment=${5:-}
  local json="$WORK/$name-$mode.json"
  set +e
  "$D2K" eval $task "$solution" --device $device -w llama3-8b-T1 --sandbox $mode --timeout 60 \
    --max-seconds 0.2 --min-samples 3 --warmup 1 --no-baseline --json "$json"
  local code=$?
  set -e
  if [ $code -gt 1 ]; then echo "FAIL: $name ($mode): d2k exited $code" >&2; exit 1; fi
  expect_eq "$(status_of "$json" llama3-8b-T1)" "$want" "$name with --sandbox $mode"
  if [ -n "$fragment" ]; then
    case "$(message_of "$json" llama3-8b-T1)" in *"$fragment"*) echo "ok: message names '$fragment'";;
      *) echo "FAIL: $name: message lacks '$fragment': $(message_of "$json" llama3-8b-T1)" >&2; exit 1;; esac
  fi
}
expect_log_has() {
  case "$(log_of "$WORK/$1-$2.json")" in *"$3"*) echo "ok: $1 ($2) log shows '$3'";;
    *) echo "FAIL: $1 ($2): log lacks '$3'" >&2; exit 1;; esac
}
expect_log_lacks() {
  case "$(log_of "$WORK/$1-$2.json")" in *"$3"*) echo "FAIL: $1 ($2): log shows '$3'" >&2; exit 1;;
    *) echo "ok: $1 ($2) log does not show '$3'";; esac
}

# A folder with the expert's d2k_run and the corpus entry's d2k_prepare, in the device's language.
corpus_solution() {
  local dir="$WORK/solutions/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$expert" "$dir/"
  cp "$corpus/sandbox_$1.cpp" "$dir/sandbox_$1.$ext"
  echo "$dir"
}

no_leftovers() {  # no process whose command line names this test's folder outlived the run
  local left
  left=$(grep -l -a -- "$WORK" /proc/[0-9]*/cmdline 2>/dev/null | grep -v "/proc/$$/" | grep -v "/proc/self/" || true)
  for f in $left; do
    if [ -e "$f" ] && tr '\0' ' ' < "$f" | grep -q d2k-worker; then
      echo "FAIL: a worker process outlived its run: $(tr '\0' ' ' < "$f")" >&2; exit 1
    fi
  done
  echo "ok: no worker process left"
}

run_corpus() {
  # Network: a listener on the host's loopback counts the connections that reach it.
  python3 - "$WORK/connections" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 47219)); s.listen(8)
n = 0
open(sys.argv[1], "w").write("0")
while True:
    c, _ = s.accept(); n += 1; c.close()
    open(sys.argv[1], "w").write(str(n))
PY
  local listener=$!
  trap "kill $listener 2>/dev/null || true" EXIT
  for _ in $(seq 50); do [ -f "$WORK/connections" ] && break; sleep 0.1; done
  local network; network=$(corpus_solution network)
  expect_eval network "$network" strict passed
  expect_eq "$(cat "$WORK/connections")" 0 "connections that reached the host from the sandbox"
  expect_eval network "$network" off runtime_error "escaped: connected"

  local write; write=$(corpus_solution write_outside)
  rm -f /tmp/d2k-sandbox-escape
  expect_eval write_outside "$write" strict passed
  [ ! -e /tmp/d2k-sandbox-escape ] || { echo "FAIL: /tmp/d2k-sandbox-escape was written" >&2; exit 1; }
  expect_eval write_outside "$write" off runtime_error "escaped: wrote"
  rm -f /tmp/d2k-sandbox-escape /usr/d2k-sandbox-escape /etc/d2k-sandbox-escape

  local read; read=$(corpus_solution read_host)
  expect_eval read_host "$read" strict passed
  expect_eval read_host "$read" off runtime_error "escaped: read"

  local secret; secret=$(corpus_solution secret_env)
  export D2K_TEST_SECRET=sk-d2k-test-$RANDOM OPENAI_API_KEY=sk-d2k-test-$RANDOM
  expect_eval secret_env "$secret" strict passed
  expect_eval secret_env "$secret" off passed  # the environment is scrubbed even without isolation
  unset D2K_TEST_SECRET OPENAI_API_KEY

  local bomb; bomb=$(corpus_solution fork_bomb)
  expect_eval fork_bomb "$bomb" strict passed
  no_leftovers
}
