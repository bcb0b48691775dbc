"""A scripted model for campaign tests: an OpenAI-compatible endpoint whose every reply follows from the
request alone (no state), so that concurrent runs, kills and resumes all get the answers an uninterrupted
run would. It reads the task (`# Task <name>` in the prompt), the condition (the tools, the levels of the
"Expert design" block) and the turn (the assistant messages so far) and plays a fixed policy:

  model "scripted-expert": writes the task's cpu solution, checks it, submits (design-only: a design).
  model "scripted-weak":   none: a solution that does not compile; L1: the cpu solution made twice as
                           slow (it spins as long again after each call); L1+L2 and L1+L2+L3: the cpu
                           solution; design-only: a design.

With POLICY_DEVICE=cuda in its environment (a campaign on a GPU) the policy writes the task's cuda
expert (every file of solution/cuda) instead of its cpu solution, and the weak model's L1 solution runs
the expert's d2k_run twice per call (twice the GPU time; the same outputs, for tasks whose outputs are
not in place: act/silu_and_mul, moe/topk_softmax, moe/sum_reduce).

Requests under /a/ and /b/ are the same model server seen as two endpoints (the campaign's per-endpoint
limit). Usage: policy_model.py ROOT PORT_FILE [LOG] -- prints nothing; writes the port to PORT_FILE.
"""
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = sys.argv[1]
ENTRY = 'extern "C" int d2k_run(const d2k_call* call) {'
SLOW = """
#include <chrono>
extern "C" int d2k_run(const d2k_call* call) {
  const auto start = std::chrono::steady_clock::now();
  const int rc = expert_run_(call);
  const auto took = std::chrono::steady_clock::now() - start;
  while (std::chrono::steady_clock::now() - start < 2 * took) {
  }
  return rc;
}
"""
TWICE = """
extern "C" int d2k_run(const d2k_call* call) {
  const int rc = expert_run_(call);
  return rc != 0 ? rc : expert_run_(call);
}
"""
DEVICE = os.environ.get("POLICY_DEVICE", "cpu")
DESIGN = "## L1 algorithm\nOne pass.\n\n## L2 dataflow\nRegisters.\n\n## L3 execution\nA warp per row.\n"
LOCK = threading.Lock()


def solution(task):
    """The expert's files for DEVICE: {file name: text}, the one defining d2k_run first."""
    folder = f"{ROOT}/tasks/{task}/solution/{DEVICE}"
    files = {}
    for file in sorted(os.listdir(folder)):
        if file.endswith((".cpp", ".cu", ".cuh", ".h", ".hpp")):
            with open(f"{folder}/{file}") as f:
                files[file] = f.read()
    return dict(sorted(files.items(), key=lambda item: ENTRY not in item[1]))


def condition(body, prompt):
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    if "check" not in tools:
        return "design-only"
    if "## Expert design" not in prompt:
        return "none"
    design = prompt.split("## Expert design", 1)[1].split("## What to do", 1)[0]
    if "## L3 " in design:
        return "L1+L2+L3"
    if "## L2 " in design:
        return "L1+L2"
    return "L1"


def plan(model, task, cond):
    """The turns of the policy: lists of (tool, arguments)."""
    if cond == "design-only":
        return [[("write_file", {"path": "design.md", "content": DESIGN})], [("submit", {})]]
    files = solution(task)
    main = next(iter(files))
    text = files[main]
    assert ENTRY in text, task
    if model.endswith("weak") and cond == "none":
        text = text.replace(ENTRY, "this does not compile " + ENTRY, 1)
    elif model.endswith("weak") and cond == "L1":
        text = text.replace(ENTRY, 'static int expert_run_(const d2k_call* call) {', 1) + (TWICE if DEVICE == "cuda" else SLOW)
    files[main] = text
    writes = [("write_file", {"path": file, "content": content}) for file, content in files.items()]
    return [[("list_files", {})], writes, [("check", {})], [("submit", {})]]


def reply(body):
    messages = body["messages"]
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    task = re.search(r"^# Task (\S+)", prompt, re.M).group(1)
    turn = sum(1 for m in messages if m["role"] == "assistant")
    turns = plan(body["model"], task, condition(body, prompt))
    calls = turns[min(turn, len(turns) - 1)]
    tool_calls = [{"id": f"call_{turn}_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                  for i, (n, a) in enumerate(calls)]
    size = len(json.dumps(body))
    return {"id": f"chatcmpl-{turn}", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                         "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": size // 4, "completion_tokens": 40 + len(json.dumps(tool_calls)) // 4,
                      "prompt_tokens_details": {"cached_tokens": 0}}}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
            answer, status = reply(body), 200
        except Exception as e:  # a request the policy cannot answer fails the test loudly
            answer, status = {"error": {"type": "policy", "message": repr(e)}}, 400
        if len(sys.argv) > 3:
            with LOCK, open(sys.argv[3], "a") as log:
                log.write(json.dumps({"path": self.path, "status": status, "model": body.get("model") if status == 200 else None}) + "\n")
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
