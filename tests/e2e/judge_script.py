"""Scripts for d2k-scripted-server playing an agent or a judge, for tests/e2e/judge_cpu.sh.

A scripted judge cannot read: its replies are written here, from the subject's files and the task's
guidance, so that the verdicts, the quotes and therefore the scores are known in advance. What the tests
check with it is the plumbing and the arithmetic, never the judge.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_script import make_script  # noqa: E402

SOURCE = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl", ".py")


def item_ids(root, task):
    text = open(f"{root}/tasks/{task}/guidance.md").read()
    return re.findall(r"^## (L[123]\.\d+) ", text, flags=re.M)


def subject_files(path):
    """The files d2k shows for a subject: a design file, a source file, or a folder's sources by name."""
    if os.path.isfile(path):
        return [path]
    found = []
    for folder, _, names in os.walk(path):
        found += [os.path.join(folder, n) for n in names if n.endswith(SOURCE) or n == "design.md"]
    return sorted(found, key=lambda p: os.path.relpath(p, path))


def quotes(path, count):
    """Lines of the subject long enough to be evidence, verbatim."""
    lines = []
    for file in subject_files(path):
        lines += [l.strip() for l in open(file, encoding="utf-8", errors="replace") if len(l.strip()) >= 24]
    assert lines, f"no quotable line in {path}"
    return [lines[i % len(lines)] for i in range(count)]


def judge_reply(ids, mode, subject, code):
    """mode: met (all met), not_met (none), mixed (L1 met, L2 partly met, L3 not met)."""
    evidence = quotes(subject, len(ids)) if mode != "not_met" else []
    verdicts = []
    for i, item in enumerate(reversed(ids)):  # never in the prompt's order: verdicts are keyed by id
        verdict = mode if mode != "mixed" else {"1": "met", "2": "partly_met", "3": "not_met"}[item[1]]
        verdicts.append({"id": item, "verdict": verdict, "reason": f"scripted {verdict}",
                         "evidence": [evidence[i]] if verdict != "not_met" else []})
    reply = {"verdicts": verdicts}
    if code:
        reply["audit"] = {"verdict": "clean", "rule": None, "reason": "scripted", "evidence": []}
    return json.dumps(reply)


def judge_turns(root, task, subject, mode, kind, samples):
    ids = item_ids(root, task)
    return [{"text": judge_reply(ids, mode, subject, kind == "code")} for _ in range(samples)]


def main():
    command = sys.argv[1]
    if command == "design-run":  # design-run PROVIDER DESIGN_FILE: a design-only agent run that submits it
        provider, design = sys.argv[2:4]
        turns = [{"calls": [("read_file", {"path": "TASK.md"})]},
                 {"calls": [("write_file", {"path": "design.md", "content": open(design).read()})]},
                 {"text": "Submitting.", "calls": [("submit", {})]}]
        print(json.dumps(make_script(provider, turns)))
    elif command == "judge":  # judge PROVIDER ROOT TASK SUBJECT MODE KIND SAMPLES
        provider, root, task, subject, mode, kind, samples = sys.argv[2:9]
        print(json.dumps(make_script(provider, judge_turns(root, task, subject, mode, kind, int(samples)))))
    elif command == "calibrate":  # calibrate PROVIDER ROOT PLAN SAMPLES: the replies for `d2k judge calibrate --plan`'s cases
        provider, root, plan, samples = sys.argv[2:6]
        turns = []
        for line in open(plan):
            case = json.loads(line)
            mode = "met" if case["bar"].startswith(">=") else "not_met"
            turns += judge_turns(root, case["task"], case["subject"], mode, case["kind"], int(samples))
        print(json.dumps(make_script(provider, turns)))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
