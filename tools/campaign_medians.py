#!/usr/bin/env python3
"""Compares the medians of two campaigns' stores (campaign.db) evaluation by evaluation: the same plan run
twice, e.g. with one and with two runs at once on one GPU (issue 19), must agree within the noise.

For every (evaluation key, kind, workload) that passed in both stores: the ratio B / A of the medians.
Printed per kind (expert, final, rerun): how many, the geomean of the ratios, the largest deviation, and
the share of B's medians inside A's 95% interval widened by the larger of the two intervals' half-widths.
As a yardstick of the noise, the same figures for A's final evaluation against A's re-run of each
passing run (the same solution, another seed).

  tools/campaign_medians.py A/campaign.db B/campaign.db [--worst N]
"""
import argparse
import math
import sqlite3
import sys


def medians(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT e.key, e.kind, t.workload, t.median_ms, t.ci_low_ms, t.ci_high_ms FROM evaluation e "
        "JOIN trace t ON t.evaluation_id = e.id WHERE t.status = 'passed' AND t.median_ms > 0").fetchall()
    return {(k, kind, w): (m, lo, hi) for k, kind, w, m, lo, hi in rows}


def interval(x):
    """A median's 95% interval, the median itself where the store has none."""
    median, low, high = x
    return (low or median), (high or median)


def summarize(label, pairs, worst):
    if not pairs:
        print(f"{label}: none in common")
        return
    ratios = [b[0] / a[0] for _, a, b in pairs]
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    inside = 0
    for _, a, b in pairs:
        (a_low, a_high), (b_low, b_high) = interval(a), interval(b)
        half = max(a_high - a_low, b_high - b_low) / 2
        inside += a_low - half <= b[0] <= a_high + half
    print(f"{label}: {len(pairs)} medians, geomean B/A {geo:.4f}, largest deviation {max(abs(r - 1) for r in ratios):.2%}, "
          f"{inside / len(pairs):.0%} inside A's interval widened by the larger half-width")
    for key, a, b in sorted(pairs, key=lambda p: -abs(p[2][0] / p[1][0] - 1))[:worst]:
        print(f"    {' '.join(key)}: {a[0] * 1e3:.2f} us / {b[0] * 1e3:.2f} us ({b[0] / a[0] - 1:+.1%})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--worst", type=int, default=3)
    args = parser.parse_args()
    try:
        a, b = medians(args.a), medians(args.b)
    except sqlite3.Error as e:
        print(f"campaign_medians: {e}", file=sys.stderr)
        return 2
    for kind in ["expert", "final", "rerun"]:
        pairs = [(k, a[k], b[k]) for k in sorted(a) if k[1] == kind and k in b]
        summarize(f"{kind} (B against A)", pairs, args.worst)
    noise = [((k[0], "final/rerun", k[2]), a[k], a[(k[0], "rerun", k[2])]) for k in sorted(a)
             if k[1] == "final" and (k[0], "rerun", k[2]) in a]
    summarize("A's final against A's re-run (the noise)", noise, args.worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
