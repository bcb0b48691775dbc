# Resuming a run as a careless user or a hostile endpoint would (issue 18, items 3, 7, 13, 14, 19):
# one process at a time (run.lock), the experiment's settings kept (a changing option is refused, an
# allowed one recorded in run.json), a finished run reported without its model's key, the summary's
# tokens and cost, progress through retries, and no terminal escape from a model's tool name.
source "$(dirname "$0")/agent_lib.bash"
export D2K_E2E_KEY=e2e-key
with_key() { sed 's/api_key_env = ""/api_key_env = "D2K_E2E_KEY"/' "$1"; }

# A live run: the server holds its 3rd response for a minute.
python3 - "$D2K_ROOT" > "$WORK/slow.script.json" <<'PY'
import json, subprocess, sys
steps = json.loads(subprocess.check_output([sys.executable, f"{sys.argv[1]}/tests/e2e/agent_script.py", "script", "openai", sys.argv[1], "story"]))
steps[2]["delay_ms"] = 60000
print(json.dumps(steps))
PY
serve_script slow openai
with_key "$WORK/slow.toml" > "$WORK/keyed.toml"
"$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/keyed.toml" --runs-dir "$WORK/runs" 2> "$WORK/first.err" &
agent_pid=$!
for _ in $(seq 1200); do [ -f "$WORK/slow.requests.jsonl" ] && [ "$(wc -l < "$WORK/slow.requests.jsonl")" -ge 3 ] && break; sleep 0.1; done
expect_eq "$(wc -l < "$WORK/slow.requests.jsonl")" 3 "the 3rd request is in flight"
run=$(the_run "$WORK/runs")

# refused: OPTION... FRAGMENT: d2k agent --resume with OPTION... exits 2 and says FRAGMENT.
refused() {
  local fragment=${*: -1}
  set +e; out=$("$D2K" agent --resume "$run" "${@:1:$#-1}" 2>&1); local rc=$?; set -e
  expect_eq "$rc" 2 "--resume ${*:1:$#-1}: exit code"
  case "$out" in *"$fragment"*) echo "ok: it says '$fragment'";; *) fail_now "--resume ${*:1:$#-1}: no '$fragment' in: $out";; esac
}
refused "$run: the run is in use by process $agent_pid"
refused --turns 5 "--turns 5: the run has budget.max_turns = 350 (run.json)"
refused --seed 8 "--seed 8: the run has seed = 7"
refused --condition L1 "--condition \"L1\": the run has condition = \"none\""
refused --max-seconds 2 "timing.max_seconds = 0.02"
sed 's/output = 2.0/output = 4.0/' "$WORK/keyed.toml" > "$WORK/dear.toml"
refused --models "$WORK/dear.toml" "models.scripted.prices.output is 4.0 where the run has 2.0"
expect_eq "$(grep -c '"type": *"request"' "$run/transcript.jsonl" || true)" 3 "the refused resumes sent nothing"

# kill -9 drops the lock; the resume against a new endpoint may change the sandbox and the cost cap.
kill -KILL "$agent_pid"; wait "$agent_pid" || true
stop_server
done_responses=$("${AGENT_PY[@]}" responses "$run")
start_server resume openai story "$done_responses"
with_key "$WORK/resume.toml" > "$WORK/resume-key.toml"
expect_exit 0 "$D2K" agent --resume "$run" --models "$WORK/resume-key.toml" --sandbox best-effort --max-cost-usd 5 \
  > "$WORK/resume.out" 2> "$WORK/resume.err"
stop_server
expect_eq "$(python3 -c 'import json,sys; print(",".join(c["option"] for c in json.load(open(sys.argv[1]))["changes"]))' "$run/run.json")" \
  "--max-cost-usd,--sandbox,--models" "run.json records the allowed changes"
expect_eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox"])' "$run/run.json")" best-effort "the sandbox in use"
grep -q '^tokens: [0-9]* input ([0-9]* cached), [0-9]* output; cost \$[0-9.]*' "$WORK/resume.out" ||
  fail_now "the summary lacks tokens and cost: $(cat "$WORK/resume.out")"
expect_eq "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["task"], d["model"], d["condition"], d["scores"]["final_status"], d["scores"]["passed"])' "$run/result.json")" \
  "moe/topk_softmax scripted none passed True" "result.json: task, model, condition, scores"

# A finished run is reported without its model's key (and without a models file at all).
rm -f "$WORK/resume-key.toml"
expect_exit 0 env -u D2K_E2E_KEY "$D2K" agent --resume "$run" > "$WORK/report.out" 2> "$WORK/report.err"
grep -q "reporting it" "$WORK/report.err" || fail_now "the report does not say so: $(cat "$WORK/report.err")"
refused --turns 5 "--turns 5"

# An endpoint that fails: progress through the retries; a tool name with terminal escapes printed escaped.
python3 - "$D2K_ROOT" > "$WORK/evil.script.json" <<'PY'
import json, sys
sys.path.insert(0, f"{sys.argv[1]}/tests/e2e")
import agent_script
turns = [{"calls": [("evil\u001b[2K\r[turn 9] submit\n\u009b31m", {})]}] + [{"http": 500}] * 4
print(json.dumps(agent_script.make_script("openai", turns)))
PY
serve_script evil openai
expect_exit 1 "$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/evil.toml" --runs-dir "$WORK/evil-runs" \
  > "$WORK/evil.out" 2> "$WORK/evil.err"
stop_server
grep -q "attempt 1 of 4 failed (HTTP 500 server: scripted 500); retrying in" "$WORK/evil.err" ||
  fail_now "no progress through the retries: $(cat "$WORK/evil.err")"
if LC_ALL=C grep -q $'\x1b\|\xc2\x9b' "$WORK/evil.err" "$WORK/evil.out"; then fail_now "a terminal escape reached the console"; fi
grep -q '\[turn 1\] evil\\x1b\[2K\\r\[turn 9\] submit\\n\\u009b31m |' "$WORK/evil.err" ||
  fail_now "the tool name is not shown escaped: $(grep 'turn 1' "$WORK/evil.err")"
echo "ok: resume guards"
