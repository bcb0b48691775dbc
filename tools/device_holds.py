#!/usr/bin/env python3
"""Checks and summarizes a campaign's journal of device-lock holds (<campaign>/device-holds.jsonl, written
by src/campaign/device_locks.cpp): one JSON object per released hold, {"device", "exclusive", "acquired",
"released", "pid"}, times in seconds since the epoch.

The check: no exclusive hold (a timed evaluation) overlaps any other hold of its device, shared or
exclusive, from this process or another. The summary, per device: holds, the time held exclusively and
shared, the most shared holds at once (checks side by side), and the span from the first acquisition
to the last release.

  tools/device_holds.py JOURNAL [--min-concurrent-shared N]
exits 1 when an exclusive hold overlaps another (each overlap printed), or when no device ever had N
shared holds at once (a test that the lock let checks run side by side), 2 on a journal it cannot read.
"""
import argparse
import json
import sys
from collections import defaultdict


def read(path):
    holds = []
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    h = json.loads(line)
                    holds.append((int(h["device"]), bool(h["exclusive"]), float(h["acquired"]), float(h["released"]),
                                  int(h["pid"]), number))
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"{path}:{number}: not a hold ({e}): {line.strip()[:200]}")
    except OSError as e:
        print(f"device_holds: {e}", file=sys.stderr)
        sys.exit(2)
    return holds


def by_device(holds):
    """The holds of each device, in the order they were acquired."""
    grouped = defaultdict(list)
    for h in sorted(holds, key=lambda h: h[2]):
        grouped[h[0]].append(h)
    return grouped


def overlaps(grouped):
    """Pairs (exclusive hold, other hold) of one device whose intervals overlap."""
    found = []
    for items in grouped.values():
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                if b[2] >= a[3]:
                    break  # sorted by acquisition: nothing later starts before a ends
                if a[1] or b[1]:
                    found.append((a, b))
    return found


def max_concurrent_shared(items):
    events = []
    for _, exclusive, acquired, released, _, _ in items:
        if not exclusive:
            events += [(acquired, 1), (released, -1)]
    events.sort(key=lambda e: (e[0], e[1]))  # a release before an acquisition at the same instant
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("journal")
    parser.add_argument("--min-concurrent-shared", type=int, default=0)
    args = parser.parse_args()
    holds = read(args.journal)
    if not holds:
        print(f"{args.journal}: no holds")
        return 1 if args.min_concurrent_shared > 0 else 0
    grouped = by_device(holds)
    bad = overlaps(grouped)
    for a, b in bad:
        kind = lambda h: "exclusive" if h[1] else "shared"
        print(f"overlap on device {a[0]}: {kind(a)} hold of line {a[5]} (pid {a[4]}, {a[2]:.6f}-{a[3]:.6f}) and "
              f"{kind(b)} hold of line {b[5]} (pid {b[4]}, {b[2]:.6f}-{b[3]:.6f})")
    best_shared = 0
    for device in sorted(grouped):
        items = grouped[device]
        exclusive = [h for h in items if h[1]]
        shared = [h for h in items if not h[1]]
        concurrent = max_concurrent_shared(items)
        best_shared = max(best_shared, concurrent)
        span = max(h[3] for h in items) - min(h[2] for h in items)
        print(f"device {device}: {len(items)} holds ({len(exclusive)} exclusive, {len(shared)} shared) from "
              f"{len({h[4] for h in items})} process(es); exclusive {sum(h[3] - h[2] for h in exclusive):.1f} s, "
              f"shared {sum(h[3] - h[2] for h in shared):.1f} s, at most {concurrent} shared at once; span {span:.1f} s")
    print(f"{len(bad)} overlap(s) of an exclusive hold")
    if bad:
        return 1
    if best_shared < args.min_concurrent_shared:
        print(f"never {args.min_concurrent_shared} shared holds at once (at most {best_shared})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
