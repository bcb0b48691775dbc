# The whole pipeline on the cpu device: every shipped task's cpu solution passes every workload
# through `d2k bench`, and `d2k eval` of one task prints a table.
source "$(dirname "$0")/lib.bash"
"$D2K" tasks
shown=$("$D2K" tasks norm/fused_add_rmsnorm --levels 1,2,3)
case "$shown" in *"## L3 execution"*) echo "ok: guidance rendered";; *) echo "FAIL: no L3 guidance in: $shown" >&2; exit 1;; esac
"$D2K" bench --device cpu --max-seconds 0.2 --min-samples 3 --warmup 1 --json "$WORK/bench.json" | tee "$WORK/bench.txt"
python3 - "$WORK/bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [t for t in d["traces"] if t["status"] != "passed"]
assert d["traces"], "no traces"
assert not bad, [(t["task"], t["workload"], t["status"], t["message"]) for t in bad]
assert all(t["performance"]["solution"]["median_ms"] > 0 for t in d["traces"])
print(f"ok: {len(d['traces'])} traces passed")
PY
