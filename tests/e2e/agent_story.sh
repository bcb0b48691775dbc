# The issue-4 story over real HTTP, for an OpenAI-compatible and an Anthropic-compatible endpoint: the
# model reads the task, writes a wrong solution, sees check fail, fixes it and submits; on the way the
# endpoint answers 429 with Retry-After, 500s (and 529), and the model sends malformed tool calls.
source "$(dirname "$0")/agent_lib.bash"

for case in openai:with_errors anthropic:tool_use_only; do
  provider=${case%%:*} kind=${case##*:}
  start_server "$provider" "$provider" "$kind"
  expect_exit 0 "$D2K" agent "${AGENT_OPTS[@]}" --model scripted --models "$WORK/$provider.toml" \
    --condition L1 --runs-dir "$WORK/$provider-runs"
  stop_server
  run=$(the_run "$WORK/$provider-runs")
  expect_eq "$(final_field "$run" status)" '"submitted"' "$provider: status"
  expect_eq "$(final_field "$run" passed)" true "$provider: final evaluation passed"
  python3 - "$run" "$WORK/$provider.requests.jsonl" "$provider" <<'PY'
import json, sys
run, log, provider = sys.argv[1:]
records = [json.loads(l) for l in open(f"{run}/transcript.jsonl")]
requests = [json.loads(l) for l in open(log)]
kinds = [r["type"] for r in records]
results = [r for r in records if r["type"] == "tool_result"]
responses = [r for r in records if r["type"] == "response"]
# The first response came after a 429 with Retry-After: 1, honoured.
assert responses[0]["attempts"] == 2 and responses[0]["latency_seconds"] >= 1.0, responses[0]
# The 500s (and the 529) were retried inside one turn.
assert max(r["attempts"] for r in responses) >= 3, [r["attempts"] for r in responses]
format_errors = [r for r in results if r.get("format_error")]
assert len(format_errors) == 2, format_errors
checks = [json.loads(r["content"]) for r in results if r["name"] == "check"]
assert [c["passed"] for c in checks] == [False, True], checks
assert checks[0]["workloads"][0]["status"] == "incorrect_numerics"
assert kinds[-2:] == ["end", "final"]
final = records[-1]
assert {t["workload"] for t in final["traces"]} >= {"olmoe-1b-7b-T999"}, "the hidden workload ran"
assert all(t["status"] == "passed" for t in final["traces"])
# Nothing the model saw names the hidden workload.
assert all("olmoe" not in json.dumps(r["body"]) for r in requests)
# Every tool call was answered in the very next request, in order, once.
for req in requests:
    body = json.loads(req["body"])
    msgs = body["messages"]
    for i, m in enumerate(msgs):
        if provider == "openai" and m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            answered = [x["tool_call_id"] for x in msgs[i + 1:i + 1 + len(ids)] if x["role"] == "tool"]
            assert answered == ids, (ids, answered)
        if provider == "anthropic" and m["role"] == "assistant" and isinstance(m["content"], list):
            ids = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if ids:
                nxt = msgs[i + 1]
                answered = [b["tool_use_id"] for b in nxt["content"] if b["type"] == "tool_result"]
                assert nxt["role"] == "user" and answered == ids, (ids, answered)
last = json.loads(requests[-1]["body"])
assert "tools" in last and len(last["tools"]) == 9, "every tool offered"
assert "Expert design" in json.dumps(last), "the L1 guidance is in the prompt"
print(f"ok: {provider}: {len(responses)} responses, {len(requests)} HTTP requests, every tool call answered; harness overhead per turn {final['overhead']}")
PY
done
