#!/usr/bin/env python3
"""The ledger of seeds: which seeds each expert passed on which workload, across device calls and sessions.

Issues ask for "every workload on 20 consecutive seeds" (`d2k bench --repeat`), and one device call holds a
few seeds at most, so the seeds of a task come from many calls. The ledger keeps one row per (workload,
seed) evaluation in CSV files under docs/results/seeds/, each file from one device call, and answers the
question from all of them.

  seed_ledger.py extract --device cuda --gpu NAME --commit SHA --date YYYY-MM-DD --source DOC FILE.progress...
      reads `d2k eval|bench --progress jsonl` files (what a run writes line by line, so a run cut short by
      its time limit still counts its finished workloads) and prints ledger rows as CSV.
  seed_ledger.py next --need N --root DIR [--task T] LEDGER.csv...
      per cuda expert short of N consecutive seeds, the seeds to run next as "TASK FIRST COUNT" lines: the
      run after the last failure continued from its last complete seed (incomplete seeds after it, cut by a
      budget, are run again), or a new run after the last failure. .gpu/seeds.sh runs such lines.
  seed_ledger.py report [--need N] [--root DIR] [--task T] LEDGER.csv...
      per task, solution and device: the longest run of consecutive seeds on which every workload passed,
      and every failure. With --root, the cuda rows are held to every workload of the task's task.toml
      (published, hidden and smoke: what `d2k bench` runs on a GPU), and every task of the repository
      without a row of its expert on cuda is listed (0 seeds). With --need, exits 1 unless every task
      reported has N such seeds.

A seed counts for a task only when every workload has a passed row with it and none has a failed one: a
failure on any workload breaks the run at that seed, whatever else passed.
"""
import argparse
import csv
import json
import os
import sys
import tomllib
from collections import defaultdict

FIELDS = ["task", "solution", "device", "workload", "seed", "status", "median_us", "date", "gpu", "commit", "source"]


def extract(args):
    out = csv.DictWriter(sys.stdout, FIELDS, lineterminator="\n")
    out.writeheader()
    for path in args.files:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if not line.startswith("{"):
                    continue  # the text lines a --progress jsonl file may hold beside its events
                try:
                    event = json.loads(line)
                except json.JSONDecodeError as error:
                    sys.exit(f"seed_ledger: {path}:{number}: not a JSON line: {error}")
                if event.get("event") != "finished":
                    continue
                if "seed" not in event:
                    sys.exit(f"seed_ledger: {path}:{number}: a finished event without its run's seed (written by a "
                             "d2k older than the ledger): its seed is unknown")
                median = event.get("median_ms")
                out.writerow({"task": event["task"], "solution": event.get("solution", ""), "device": args.device,
                              "workload": event["workload"], "seed": event["seed"], "status": event["status"],
                              "median_us": f"{median * 1e3:.2f}" if median else "", "date": args.date,
                              "gpu": args.gpu, "commit": args.commit, "source": args.source})


def task_workloads(root, task):
    path = os.path.join(root, "tasks", task, "task.toml")
    try:
        with open(path, "rb") as f:
            return [w["name"] for w in tomllib.load(f).get("workloads", [])]
    except FileNotFoundError:
        sys.exit(f"seed_ledger: --root: no {path} for task '{task}'")


def all_tasks(root):
    tasks_dir = os.path.join(root, "tasks")
    return [f"{family}/{name}" for family in os.listdir(tasks_dir) if os.path.isdir(os.path.join(tasks_dir, family))
            for name in os.listdir(os.path.join(tasks_dir, family))
            if os.path.isfile(os.path.join(tasks_dir, family, name, "task.toml"))]


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [name for name in FIELDS if name not in (reader.fieldnames or [])]
            if missing:
                sys.exit(f"seed_ledger: {path}: not a ledger file (no column {', '.join(missing)})")
            for number, row in enumerate(reader, 2):
                try:
                    row["seed"] = int(row["seed"])
                except ValueError:
                    sys.exit(f"seed_ledger: {path}:{number}: seed '{row['seed']}' is not a number")
                row["file"] = f"{os.path.basename(path)}:{number}"
                rows.append(row)
    return rows


def longest_run(seeds):
    """(first, length) of the longest run of consecutive integers in the set; (None, 0) when empty."""
    best = (None, 0)
    for seed in sorted(seeds):
        if seed - 1 in seeds:
            continue
        length = 1
        while seed + length in seeds:
            length += 1
        if length > best[1]:
            best = (seed, length)
    return best


def seed_sets(group, expected):
    """(complete, failed): the seeds with a passed row of every expected workload and none failed, and the
    seeds with a failed row."""
    passed = defaultdict(set)
    failed = set()
    for r in group:
        if r["status"] == "passed":
            passed[r["seed"]].add(r["workload"])
        else:
            failed.add(r["seed"])
    return {seed for seed, names in passed.items() if seed not in failed and set(expected) <= names}, failed


def next_seeds(complete, failed, need):
    """(first, count): the seeds that complete a run of `need` soonest. Only a run after the last failure can
    still grow: it is continued from the last complete seed of the run that starts right after that failure
    (or right after the failure when that seed is not complete)."""
    start = max(failed, default=0) + 1
    end = start
    while end in complete:
        end += 1
    return end, need - (end - start)


def next_command(args):
    rows = read_rows(args.files)
    groups = defaultdict(list)
    for row in rows:
        if row["solution"] == "cuda" and row["device"] == "cuda":
            groups[row["task"]].append(row)
    for task in sorted(all_tasks(args.root)):
        if args.task and task not in args.task:
            continue
        complete, failed = seed_sets(groups.get(task, []), task_workloads(args.root, task))
        if longest_run(complete)[1] >= args.need:
            continue
        first, count = next_seeds(complete, failed, args.need)
        print(f"{task} {first} {count}")
    return 0


def report(args):
    rows = read_rows(args.files)
    groups = defaultdict(list)
    for row in rows:
        if args.task and row["task"] not in args.task:
            continue
        groups[(row["task"], row["solution"], row["device"])].append(row)
    if not groups:
        sys.exit("seed_ledger: no rows" + (f" for {', '.join(args.task)}" if args.task else ""))
    short = []
    if args.root:
        seen = {task for task, solution, device in groups if solution == "cuda" and device == "cuda"}
        for task in sorted(all_tasks(args.root)):
            if task not in seen and (not args.task or task in args.task):
                print(f"{task} (cuda, cuda): 0 consecutive seeds: no row in the ledger")
                if args.need:
                    short.append(f"{task} (cuda, cuda): 0 of {args.need}")
    for (task, solution, device), group in sorted(groups.items()):
        workloads = sorted({r["workload"] for r in group})
        expected = task_workloads(args.root, task) if args.root and device == "cuda" else workloads
        complete, _ = seed_sets(group, expected)
        failed = defaultdict(list)  # seed -> failed rows
        for r in group:
            if r["status"] != "passed":
                failed[r["seed"]].append(r)
        seeds = [r["seed"] for r in group]
        first, length = longest_run(complete)
        span = f"seeds {first}-{first + length - 1}" if length else "no seed"
        print(f"{task} ({solution}, {device}): {length} consecutive seeds with all {len(expected)} workloads passed "
              f"({span}); {len(group)} rows, seeds {min(seeds)}-{max(seeds)}, "
              f"commits {', '.join(sorted({r['commit'] for r in group}))}")
        unseen = sorted(set(expected) - set(workloads))
        if unseen:
            print(f"  never evaluated: {', '.join(unseen)}")
        for seed in sorted(failed):
            for r in failed[seed]:
                print(f"  seed {seed}: {r['workload']}: {r['status']} ({r['file']}, {r['date']}, {r['commit']})")
        if args.need and length < args.need:
            short.append(f"{task} ({solution}, {device}): {length} of {args.need}")
    if args.need:
        if short:
            print(f"short of {args.need} consecutive seeds: " + "; ".join(short))
            return 1
        print(f"every task reported has {args.need} consecutive seeds")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("extract", help="ledger rows (CSV) from d2k --progress jsonl files")
    e.add_argument("--device", required=True, choices=["cuda", "cpu"])
    e.add_argument("--gpu", required=True, help="the machine, e.g. 'H200 GPU-9727a686'")
    e.add_argument("--commit", required=True, help="the commit the binaries and solutions were built at")
    e.add_argument("--date", required=True)
    e.add_argument("--source", required=True, help="the docs/results file that records the run")
    e.add_argument("files", nargs="+")
    n = sub.add_parser("next", help="the seeds to run next per cuda expert short of --need")
    n.add_argument("--need", type=int, required=True)
    n.add_argument("--root", required=True, help="the repository: its tasks and their workloads")
    n.add_argument("--task", action="append", help="only this task (repeatable)")
    n.add_argument("files", nargs="+")
    r = sub.add_parser("report", help="consecutive seeds per task from ledger files")
    r.add_argument("--need", type=int, default=0)
    r.add_argument("--root", help="the repository, to hold cuda rows to every workload of task.toml")
    r.add_argument("--task", action="append", help="only this task (repeatable)")
    r.add_argument("files", nargs="+")
    args = parser.parse_args()
    sys.exit({"extract": extract, "next": next_command, "report": report}[args.command](args))


if __name__ == "__main__":
    main()
