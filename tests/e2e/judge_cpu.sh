# d2k judge end to end on the cpu device, against scripted endpoints over real HTTP: a design-only agent
# run's design and an agent run's submitted solution are judged (3 samples each), a judgement killed after
# its second reply resumes without asking for it again, no judge prompt names the run's condition, model
# or folder, and `d2k judge calibrate` runs every case. The scripted judge's replies are written by
# judge_script.py so that its scores are known: this checks plumbing and arithmetic, not a judge.
source "$(dirname "$0")/agent_lib.bash"
JUDGE_PY=(python3 "$D2K_ROOT/tests/e2e/judge_script.py")
DESIGN="$D2K_ROOT/configs/judge/designs/moe/topk_softmax.md"

# serve NAME SCRIPT_JSON MODEL: a scripted endpoint playing the script; $WORK/NAME.toml names it MODEL.
serve() {
  echo "$2" > "$WORK/$1.script.json"
  serve_script "$1" openai "$3"
}
requests() { wc -l < "$WORK/$1.requests.jsonl" | tr -d ' '; }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(eval("d"+sys.argv[2])))' "$1" "$2"; }
# blind NAME RUN SECRET...: no request the judge got holds the run folder's name or any secret.
blind() {
  local name=$1 run=$2; shift 2
  python3 - "$WORK/$name.requests.jsonl" "$(basename "$run")" "$@" <<'PY'
import json, sys
log, secrets = sys.argv[1], sys.argv[2:]
bodies = [json.loads(l)["body"] for l in open(log)]
assert bodies, "no request"
for body in bodies:
    for secret in secrets:
        assert secret not in body, f"{secret!r} reached the judge"
print(f"ok: {len(bodies)} judge requests name none of {secrets}")
PY
}

# 1. A design-only agent run by the model agentmodel-q7, then its design judged.
serve agent "$("${JUDGE_PY[@]}" design-run openai "$DESIGN")" agentmodel-q7
expect_exit 0 "$D2K" agent "${AGENT_OPTS[@]}" --model agentmodel-q7 --models "$WORK/agent.toml" --condition design-only \
  --runs-dir "$WORK/design-runs"
stop_server
run=$(the_run "$WORK/design-runs")
serve judge-design "$("${JUDGE_PY[@]}" judge openai "$D2K_ROOT" moe/topk_softmax "$run/submitted/design.md" met design 3)" judge-m
expect_exit 0 "$D2K" judge design "$run" --model judge-m --models "$WORK/judge-design.toml" --seed 5
stop_server
score="$run/judge/design-judge-m.json"
expect_eq "$(field "$score" '["score"]')" 100.0 "design score"
expect_eq "$(field "$score" '["kind"]')" '"design"' "design kind"
expect_eq "$(field "$score" '["complete"]')" true "design judgement complete"
expect_eq "$(requests judge-design)" 3 "design judge requests"
blind judge-design "$run" design-only agentmodel-q7 "$WORK"

# 2. An agent run (condition L1+L2) that submits a solution, then its code judged; killed after the
# second reply, resumed: the stored replies are not asked again.
serve agent2 "$(python3 "$D2K_ROOT/tests/e2e/agent_script.py" script openai "$D2K_ROOT" story)" agentmodel-q7
expect_exit 0 "$D2K" agent "${AGENT_OPTS[@]}" --model agentmodel-q7 --models "$WORK/agent2.toml" --condition L1+L2 \
  --runs-dir "$WORK/code-runs"
stop_server
run=$(the_run "$WORK/code-runs")
[ -f "$run/submitted/topk.cpp" ] || fail_now "the agent run submitted no topk.cpp"
serve judge-code "$("${JUDGE_PY[@]}" judge openai "$D2K_ROOT" moe/topk_softmax "$run/submitted" mixed code 3)" judge-m
expect_exit 137 env D2K_JUDGE_CRASH_AT=response:2 "$D2K" judge code "$run" --model judge-m --models "$WORK/judge-code.toml"
expect_eq "$(requests judge-code)" 2 "requests before the kill"
expect_exit 0 "$D2K" judge code "$run" --model judge-m --models "$WORK/judge-code.toml" | tee "$WORK/judge-code.out"
stop_server
expect_eq "$(requests judge-code)" 3 "requests in all: none asked twice"
score="$run/judge/code-judge-m.json"
# L1 met (3 items), L2 partly met (4), L3 not met (3): (3 + 4 x 0.5) / 10.
expect_eq "$(field "$score" '["score"]')" 50.0 "code score"
expect_eq "$(field "$score" '["levels"]')" '{"L1": 100.0, "L2": 50.0, "L3": 0.0}' "code score per level"
expect_eq "$(field "$score" '["audit"]["verdict"]')" '"clean"' "audit"
expect_eq "$(field "$score" '["agreement"]["mean_item_agreement"]')" 1.0 "agreement"
expect_eq "$(field "$score" '["usage"]["requests"]')" 3 "requests recorded"
grep -q "score 50.0 of 100 (L1 100.0, L2 50.0, L3 0.0)" "$WORK/judge-code.out" || fail_now "the table lacks the score line"
blind judge-code "$run" L1+L2 agentmodel-q7 "$WORK"

# 3. Calibration: every case, 3 samples each, against a judge scripted to meet the bars.
"$D2K" judge calibrate --plan > "$WORK/plan.jsonl"
expect_eq "$(wc -l < "$WORK/plan.jsonl" | tr -d ' ')" 18 "calibration cases"
serve judge-cal "$("${JUDGE_PY[@]}" calibrate openai "$D2K_ROOT" "$WORK/plan.jsonl" 3)" judge-m
expect_exit 0 "$D2K" judge calibrate --model judge-m --models "$WORK/judge-cal.toml" --out "$WORK/calibration" | tee "$WORK/cal.out"
stop_server
expect_eq "$(grep -c '| pass |' "$WORK/cal.out")" 18 "calibration cases within their bars"
grep -q "^calibrated: 18 of 18 cases" "$WORK/cal.out" || fail_now "calibrate did not say calibrated"
echo "ok: d2k judge design, code (killed and resumed) and calibrate"
