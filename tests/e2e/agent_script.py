"""Scripts for d2k-scripted-server and checks of agent run folders, shared by tests/e2e/agent_*.sh.

A "turn" is a list of tool calls (name, arguments) and an optional text; make_script turns them into
the provider's response bodies. Special turns: {"http": status, "headers": {...}} answers with an
error, {"delay_ms": n} is added to the next step, {"raw_arguments": text} sends arguments as given.
"""
import json
import sys

WRONG, RIGHT = "row[a] < row[b]", "row[a] > row[b]"


def solution(root, wrong=False):
    text = open(f"{root}/tasks/moe/topk_softmax/solution/cpu/topk_softmax.cpp").read()
    return text.replace(RIGHT, WRONG) if wrong else text


def story(root):
    """Reads the task, writes a wrong solution, sees check fail, fixes it, benchmarks, submits."""
    return [
        {"text": "Let me look.", "calls": [("list_files", {})]},
        {"calls": [("read_file", {"path": "TASK.md"})]},
        {"calls": [("write_file", {"path": "topk.cpp", "content": solution(root, wrong=True)})]},
        {"calls": [("compile", {}), ("check", {})]},
        {"calls": [("edit_file", {"path": "topk.cpp", "old_text": WRONG, "new_text": RIGHT})]},
        {"calls": [("check", {})]},
        {"calls": [("benchmark", {})]},
        {"text": "Done.", "calls": [("submit", {})]},
    ]


def openai_body(turn, n):
    calls = []
    for i, (name, args) in enumerate(turn.get("calls", [])):
        raw = turn["raw_arguments"] if "raw_arguments" in turn and i == 0 else json.dumps(args)
        calls.append({"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": raw}})
    message = {"role": "assistant", "content": turn.get("text") or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1000 + 100 * n, "completion_tokens": 50,
                      "total_tokens": 1050 + 100 * n, "prompt_tokens_details": {"cached_tokens": 500}}}


def anthropic_body(turn, n):
    content = []
    if turn.get("text"):
        content.append({"type": "text", "text": turn["text"]})
    for i, (name, args) in enumerate(turn.get("calls", [])):
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args})
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "scripted", "content": content,
            "stop_reason": "tool_use" if turn.get("calls") else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 500 + 100 * n, "output_tokens": 50, "cache_read_input_tokens": 500,
                      "cache_creation_input_tokens": 0}}


def make_script(provider, turns):
    steps, n, delay = [], 0, 0
    for turn in turns:
        if "delay_ms" in turn and len(turn) == 1:
            delay = turn["delay_ms"]
            continue
        if "http" in turn:
            body = turn.get("body", {"error": {"type": "error", "message": f"scripted {turn['http']}"}})
            steps.append({"status": turn["http"], "headers": turn.get("headers", {}), "body": body, "delay_ms": delay})
        else:
            body = (openai_body if provider == "openai" else anthropic_body)(turn, n)
            steps.append({"status": 200, "body": body, "delay_ms": delay})
            n += 1
        delay = 0
    return steps


def models_toml(provider, port, name="scripted"):
    base = f"http://127.0.0.1:{port}/v1"
    return f"""[models.{name}]
provider = "{provider}"
base_url = "{base}"
model = "scripted-{provider}"
api_key_env = ""
max_tokens = 4096
prices = {{ input = 1.0, cached_input = 0.5, output = 2.0 }}
timeout_s = 60
retry = {{ max_attempts = 4, base_delay_s = 0.05, max_delay_s = 2.0 }}
"""


VOLATILE = {"time", "seq", "latency_seconds", "tool_seconds", "overhead_ms", "model_seconds", "wall_seconds", "seconds",
            "median_ms", "ci95_ms", "baseline_median_ms", "speedup", "percent_of_speed_of_light", "achieved_gbps",
            "achieved_tflops", "geomean_median_ms", "geomean_speedup", "time_geomean_ms", "performance", "timestamp",
            "overhead", "log", "attempts", "outside_clock", "second_clock"}


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def records(run_dir):
    """The complete records; a torn last line (a kill mid-write) is left out, as d2k does."""
    with open(f"{run_dir}/transcript.jsonl") as f:
        lines = f.read().split("\n")
    return [json.loads(line) for line in lines[:-1]]


def normalized(run_dir):
    out = []
    for r in records(run_dir):
        if r["type"] == "resume":
            continue
        if "content" in r:
            r = dict(r, content=json.loads(r["content"]))
        out.append(strip(r))
    return out


def main():
    command = sys.argv[1]
    if command == "script":  # script PROVIDER ROOT KIND [SKIP]: write the script of KIND to stdout
        provider, root, kind = sys.argv[2:5]
        skip = int(sys.argv[5]) if len(sys.argv) > 5 else 0
        turns = KINDS[kind](root)
        print(json.dumps(make_script(provider, turns)[skip:]))
    elif command == "models":  # models PROVIDER PORT [NAME]
        print(models_toml(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5]))
    elif command == "responses":  # responses RUN_DIR: how many responses the transcript holds
        print(sum(1 for r in records(sys.argv[2]) if r["type"] == "response"))
    elif command == "same":  # same RUN_A RUN_B: the transcripts agree but for times and resume records
        a, b = normalized(sys.argv[2]), normalized(sys.argv[3])
        if a != b:
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    print(f"first difference at record {i}:\n{json.dumps(x)[:2000]}\n{json.dumps(y)[:2000]}", file=sys.stderr)
                    break
            else:
                print(f"lengths differ: {len(a)} and {len(b)}", file=sys.stderr)
            sys.exit(1)
        seqs = [r["seq"] for r in records(sys.argv[3])]
        assert seqs == list(range(len(seqs))), f"sequence numbers repeat or skip: {seqs}"
    elif command == "final":  # final RUN_DIR FIELD: a field of the final record
        final = [r for r in records(sys.argv[2]) if r["type"] == "final"]
        print(json.dumps(final[-1][sys.argv[3]]) if final else "none")
    else:
        sys.exit(f"unknown command {command}")


def with_errors(root):
    """The story with a 429 (Retry-After), two 500s and malformed calls in between."""
    turns = story(root)
    return ([{"http": 429, "headers": {"Retry-After": "1"}}] + turns[:2] +
            [{"calls": [("read_file", {"path": "TASK.md"})], "raw_arguments": "{\"path\": \"TASK.md\""},
             {"calls": [("no_such_tool", {})]},
             {"http": 500}, {"http": 500}] + turns[2:])


def tool_use_only(root):
    """The story as an Anthropic-compatible model can get it wrong: no invalid JSON, an unknown tool."""
    turns = story(root)
    return ([{"http": 429, "headers": {"Retry-After": "1"}}] + turns[:2] +
            [{"calls": [("read_file", {})]}, {"calls": [("no_such_tool", {})]},
             {"http": 529}, {"http": 500}] + turns[2:])


def budget(root):
    return [
        {"calls": [("write_file", {"path": "topk.cpp", "content": solution(root)})]},
        {"calls": [("check", {})]},
        {"calls": [("write_file", {"path": "topk.cpp", "content": solution(root, wrong=True)})]},
        {"calls": [("submit", {})]},
    ]


def down(root):
    return [{"calls": [("list_files", {})]}] + [{"http": 500}] * 4


KINDS = {"story": story, "with_errors": with_errors, "tool_use_only": tool_use_only, "budget": budget, "down": down}

if __name__ == "__main__":
    main()
