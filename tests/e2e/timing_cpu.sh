# Timing on the cpu device through the command line: the trace records the rotated copies, the phases
# of the workload and their overhead; the table shows the spread and the overhead line; a solution that
# is right while it is checked and wrong on the timed calls is rejected.
source "$(dirname "$0")/lib.bash"
task=norm/fused_add_rmsnorm
expert="$D2K_ROOT/tasks/$task/solution/cpu"
"$D2K" eval $task "$expert" --device cpu -w llama3-8b-T1 -w llama3-8b-T2048 --max-seconds 0.2 --min-samples 5 \
  --warmup 1 --json "$WORK/expert.json" | tee "$WORK/expert.txt"
grep -q "p10-p90 us, 95% CI" "$WORK/expert.txt" || { echo "FAIL: no spread column" >&2; exit 1; }
grep -Eq "^harness: [0-9.]+ s wall for 2 workloads; timing [0-9.]+ s \(solution [0-9.]+ s, baseline [0-9.]+ s\); overhead" \
  "$WORK/expert.txt" || { echo "FAIL: no overhead line" >&2; exit 1; }
python3 - "$WORK/expert.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
# The worker starts while its inputs are drawn: the wait for them (and, on the cpu device, for the oracles)
# is its worker_draws, after its set-up.
names = ["worker_start", "worker_setup", "worker_draws", "worker_noop_timing", "worker_load", "worker_workspace",
         "worker_prepare", "worker_second_draw", "worker_repeat", "worker_run", "solution_timing",
         "worker_verification", "worker_noop_call", "worker_noop_timing_after", "worker_release", "worker_done", "check", "baseline_timing"]
for t in d["traces"]:
    assert t["status"] == "passed", (t["workload"], t["status"], t["message"])
    got = [p["name"] for p in t["phases"]]
    assert got == names, (t["workload"], got)
    total = sum(p["seconds"] for p in t["phases"])
    assert all(p["seconds"] >= 0 for p in t["phases"]), t["phases"]
    assert 0 < total <= t["wall_seconds"] + 1e-9, (total, t["wall_seconds"])
    perf = t["performance"]
    # x and residual (in place) and weight: T1's tiny set is copied up to the count cap; T2048's 33.6 MB
    # set fits the cpu's 64 MiB budget once.
    want_sets = 64 if t["workload"] == "llama3-8b-T1" else 1
    assert perf["rotation_sets"] == want_sets, (t["workload"], perf["rotation_sets"])
    assert perf["rotation_bytes"] == want_sets * (2 * 2 * 4096 * int(t["workload"].split("T")[-1]) + 2 * 4096)
    s = perf["solution"]
    assert s["p10_ms"] <= s["median_ms"] <= s["p90_ms"] and s["ci_low_ms"] <= s["median_ms"] <= s["ci_high_ms"], s
    assert t["clocks"] is None, "no GPU clocks on the cpu device"
o = d["overhead"]
assert o["workloads"] == 2
assert abs(o["wall_seconds"] - sum(t["wall_seconds"] for t in d["traces"])) < 1e-6
assert abs(o["overhead_seconds"] - (o["wall_seconds"] - o["solution_timing_seconds"] - o["baseline_timing_seconds"])) < 1e-6
assert o["largest_phase"] not in ("solution_timing", "baseline_timing", "")
print(f"ok: phases, rotation ({[t['performance']['rotation_sets'] for t in d['traces']]} copies) and overhead")
PY
expect_exit 1 "$D2K" eval $task "$D2K_ROOT/tests/e2e/solutions/wrong_when_timed.cpp" --device cpu -w llama3-8b-T1 \
  --max-seconds 0.2 --min-samples 5 --warmup 1 --json "$WORK/wrong.json"
expect_eq "$(status_of "$WORK/wrong.json" llama3-8b-T1)" rejected "wrong on the timed calls"
case "$(message_of "$WORK/wrong.json" llama3-8b-T1)" in *"timed call "*"every timed call must compute its own outputs"*) echo "ok: message names the call";;
  *) echo "FAIL: message: $(message_of "$WORK/wrong.json" llama3-8b-T1)" >&2; exit 1;; esac
