# The whole pipeline on the cpu device: every shipped task's cpu solution passes every workload
# through `d2k bench`, and `d2k eval` of one task prints a table.
source "$(dirname "$0")/lib.sh"
"$D2K" tasks
"$D2K" tasks norm/fused_add_rmsnorm --levels 1,2,3 | grep -q "L3"
"$D2K" bench --device cpu --max-seconds 0.2 --json "$WORK/bench.json" | tee "$WORK/bench.txt"
python3 - "$WORK/bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [t for t in d["traces"] if t["status"] != "passed"]
assert d["traces"], "no traces"
assert not bad, [(t["task"], t["workload"], t["status"], t["message"]) for t in bad]
assert all(t["performance"]["solution"]["median_ms"] > 0 for t in d["traces"])
print(f"ok: {len(d['traces'])} traces passed")
PY
