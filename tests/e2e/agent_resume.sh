# kill -9 at many points of a run (mid-request, mid-tool, mid-write, ...), then `d2k agent --resume`:
# the resumed transcript must equal an uninterrupted run's, times and resume records aside.
source "$(dirname "$0")/agent_lib.bash"

# The uninterrupted run.
start_server ref openai story
expect_exit 0 "$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/ref.toml" --runs-dir "$WORK/ref-runs"
stop_server
reference=$(the_run "$WORK/ref-runs")

resume_and_compare() {  # NAME RUN
  local name=$1 run=$2
  local done_responses
  done_responses=$("${AGENT_PY[@]}" responses "$run")
  start_server "$name-resume" openai story "$done_responses"
  expect_exit 0 "$D2K" agent --resume "$run" --models "$WORK/$name-resume.toml"
  stop_server
  "${AGENT_PY[@]}" same "$reference" "$run"
  echo "ok: $name: resumed after $done_responses responses; the transcript matches the uninterrupted run's"
}

# Kills at named points (D2K_AGENT_CRASH_AT: SIGKILL from inside, at an exact place).
for point in request:1 request:5 response:3 tool:3 tool:5 tool:6 tool:9 turn:4 write:1 write:8 write:14 end:1; do
  name=${point/:/-}
  start_server "$name" openai story
  expect_exit 137 env D2K_AGENT_CRASH_AT="$point" "$D2K" agent "${AGENT_OPTS[@]}" --model scripted \
    --models "$WORK/$name.toml" --runs-dir "$WORK/$name-runs"
  stop_server
  resume_and_compare "$name" "$(the_run "$WORK/$name-runs")"
done

# A kill from outside while the model is answering: the server holds its 6th response for a minute.
python3 - "$D2K_ROOT" > "$WORK/slow.script.json" <<'PY'
import json, subprocess, sys
steps = json.loads(subprocess.check_output([sys.executable, f"{sys.argv[1]}/tests/e2e/agent_script.py", "script", "openai", sys.argv[1], "story"]))
steps[5]["delay_ms"] = 60000
print(json.dumps(steps))
PY
serve_script slow openai
"$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/slow.toml" --runs-dir "$WORK/slow-runs" &
agent_pid=$!
for _ in $(seq 1200); do [ -f "$WORK/slow.requests.jsonl" ] && [ "$(wc -l < "$WORK/slow.requests.jsonl")" -ge 6 ] && break; sleep 0.1; done
expect_eq "$(wc -l < "$WORK/slow.requests.jsonl")" 6 "mid-request: the 6th request is in flight"
sleep 0.3
kill -KILL "$agent_pid"
wait "$agent_pid" || true
stop_server
run=$(the_run "$WORK/slow-runs")
expect_eq "$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["type"])' "$run/transcript.jsonl")" request "mid-request: the last record"
resume_and_compare slow "$run"
