"""Reads d2k bench/eval --json files, or their --progress jsonl files (FILE.progress: the finished lines,
also of a run a time budget cut), and prints, per workload, how close the honest runs came to the two
clock checks' bars (docs/metrics.md): the outside clock's reported/bar and the second clock's work/bar.
A ratio above 1 would be a false alarm; the closest runs are what the slack must cover."""
import json
import sys
from collections import defaultdict

EXPLAINED, SLACK_FRACTION, SLACK_CUDA_MS = 0.75, 0.25, 0.05  # cuda (src/eval/checks.cpp)
SECOND_FACTOR, SECOND_SLACK_MS = 1.1, 0.005


def traces(path):
    if path.endswith(".progress"):
        for line in open(path):
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == "finished":
                    yield event
        return
    data = json.load(open(path))
    if "runs" in data:
        for run in data["runs"]:
            yield from run["traces"]
    else:
        yield from data["traces"]


rows = defaultdict(lambda: {"n": 0, "failed": 0, "outside": 0.0, "second": 0.0, "timed": 0.0})
for path in sys.argv[1:]:
    for t in traces(path):
        row = rows[(t["task"], t["workload"])]
        row["n"] += 1
        row["failed"] += t["status"] != "passed"
        oc = t.get("outside_clock")
        if oc:
            bar = EXPLAINED * oc["implied_ms"] - (SLACK_FRACTION * oc["harness_ms"] + SLACK_CUDA_MS)
            row["outside"] = max(row["outside"], bar / oc["reported_ms"] if oc["reported_ms"] > 0 else 0)
        sc = t.get("second_clock")
        if sc:
            timer = max(sc["event_ms"], sc["timed_median_ms"])
            row["second"] = max(row["second"], sc["busy_ms"] / (SECOND_FACTOR * timer + SECOND_SLACK_MS))
            row["timed"] = max(row["timed"], (sc["busy_ms"] - SECOND_SLACK_MS) / SECOND_FACTOR / sc["timed_median_ms"])
print(f"{'task':24} {'workload':36} {'runs':>5} {'failed':>6} {'outside bar/reported':>21} {'work/bar':>9} {'timed bar/median':>17}")
for (task, workload), r in sorted(rows.items()):
    print(f"{task:24} {workload:36} {r['n']:>5} {r['failed']:>6} {r['outside']:>21.3f} {r['second']:>9.3f} {r['timed']:>17.3f}")
print("the largest of each ratio over every run; above 1.000 is a false alarm")
