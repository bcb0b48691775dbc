# Budgets and failing endpoints over real HTTP: a turn budget that ends the run submits the best correct
# solution so far (not the wrong one in the workspace); an endpoint that keeps failing ends the run
# with api_error; a bad models file is refused naming the field.
source "$(dirname "$0")/agent_lib.bash"

start_server budget openai budget
expect_exit 0 "$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/budget.toml" --turns 3 --runs-dir "$WORK/budget-runs"
kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" || true
run=$(the_run "$WORK/budget-runs")
expect_eq "$(final_field "$run" status)" '"budget"' "turn budget: status"
expect_eq "$(final_field "$run" solution)" '"candidates/1"' "turn budget: the checked solution is evaluated"
expect_eq "$(final_field "$run" passed)" true "turn budget: final evaluation passed"
expect_eq "$(wc -l < "$WORK/budget.requests.jsonl")" 3 "turn budget: requests made"

start_server down openai down
expect_exit 1 "$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/down.toml" --runs-dir "$WORK/down-runs"
stop_server
run=$(the_run "$WORK/down-runs")
expect_eq "$(final_field "$run" status)" '"api_error"' "failing endpoint: status"
expect_eq "$(final_field "$run" solution)" null "failing endpoint: no solution"

start_server cost anthropic budget
expect_exit 1 "$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/cost.toml" --max-cost-usd 0.0001 --runs-dir "$WORK/cost-runs"
kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" || true
run=$(the_run "$WORK/cost-runs")
expect_eq "$(final_field "$run" status)" '"budget"' "cost budget: status"
case "$(final_field "$run" reason)" in *cost*) echo "ok: the reason names the cost";; *) echo "FAIL: reason $(final_field "$run" reason)" >&2; exit 1;; esac

printf '[models.bad]\nprovider = "openai"\napi_key_env = ""\nbase_url = "ftp://x"\nmodel = "m"\nprices = { input = 1, output = 1 }\n' > "$WORK/bad.toml"
set +e; out=$("$D2K" agent "${AGENT_OPTS[@]}" --model bad --models "$WORK/bad.toml" 2>&1); rc=$?; set -e
expect_eq "$rc" 2 "bad models file: exit code"
case "$out" in *base_url*) echo "ok: the error names base_url";; *) echo "FAIL: $out" >&2; exit 1;; esac
