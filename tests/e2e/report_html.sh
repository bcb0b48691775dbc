# `d2k report --html` rendered by a real browser: a store holding the hand campaign of
# tests/campaign/report_fixture.hpp (written by d2k-report-store, REPORT_STORE), reported as JSON, CSV and
# HTML; headless Chromium (Debian's chromium, installed by scripts/setup) renders the page, and its DOM
# must hold the arms table with the JSON report's numbers and the CSV's cells, the charts, and the
# escaped model name. The screenshot stays as the test's artifact: build/tests/e2e/report_html/report.png.
source "$(dirname "$0")/lib.bash"
: "${REPORT_STORE:?}"
STARTED=$(date +%s.%N)
CHROMIUM=$(command -v chromium || true)
[ -n "$CHROMIUM" ] || fail_now "no chromium on PATH: scripts/setup installs Debian's chromium package for this test"

mkdir -p "$WORK/campaign"
"$REPORT_STORE" "$WORK/campaign/campaign.db"
"$D2K" report "$WORK/campaign/campaign.db" --json "$WORK/report.json" --csv "$WORK/csv" --html "$WORK/report.html" > "$WORK/report.txt"
[ -s "$WORK/report.html" ] || fail_now "d2k report --html wrote no $WORK/report.html"

# Self-contained: nothing names a remote resource.
for remote in http @import 'src=' 'href=' '<script' '<link' 'url('; do
  if grep -qiF -- "$remote" "$WORK/report.html"; then fail_now "report.html holds '$remote': $(grep -oiF -- "$remote" "$WORK/report.html" | head -1)"; fi
done
echo "ok: report.html names no remote resource"

# Chromium refuses to run as root without --no-sandbox (CI runs the tests as root in a container); the
# profile folder keeps it off the user's; --disable-dev-shm-usage: containers often give /dev/shm 64 MB. No
# display is needed in headless mode.
chrome() {
  timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check \
    --user-data-dir="$WORK/chromium-profile" "$@" 2> >(grep -v -e 'dbus' -e 'Fontconfig' >> "$WORK/chromium.log")
}
T0=$(date +%s.%N)
chrome --dump-dom "file://$WORK/report.html" > "$WORK/dom.html" || fail_now "chromium --dump-dom failed: $WORK/chromium.log"
T1=$(date +%s.%N)
chrome --screenshot="$WORK/report.png" --window-size=1400,2000 "file://$WORK/report.html" > /dev/null ||
  fail_now "chromium --screenshot failed: $WORK/chromium.log"
T2=$(date +%s.%N)
echo "chromium: dump-dom $(python3 -c "print(f'{$T1-$T0:.1f}')") s, screenshot $(python3 -c "print(f'{$T2-$T1:.1f}')") s"

python3 - "$WORK/dom.html" "$WORK/report.json" "$WORK/csv/arms.csv" "$WORK/report.png" <<'PY' || fail_now "the rendered page does not hold the report (above)"
import csv, json, struct, sys
from html.parser import HTMLParser

dom_file, json_file, csv_file, png_file = sys.argv[1:]

class Page(HTMLParser):
    """The rendered DOM's tables (id -> rows of cell text), element ids, and element counts by class."""
    def __init__(self):
        super().__init__()
        self.tables, self.ids, self.classes = {}, set(), {}
        self.table = self.row = self.cell = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a: self.ids.add(a["id"])
        if "class" in a: self.classes[a["class"]] = self.classes.get(a["class"], 0) + 1
        if tag == "table": self.table = self.tables.setdefault(a.get("id"), [])
        elif tag == "tr" and self.table is not None: self.row = []
        elif tag in ("td", "th") and self.row is not None: self.cell = ""
    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None: self.row.append(self.cell); self.cell = None
        elif tag == "tr" and self.row is not None: self.table.append(self.row); self.row = None
        elif tag == "table": self.table = None
    def handle_data(self, data):
        if self.cell is not None: self.cell += data

page = Page()
page.feed(open(dom_file, encoding="utf-8").read())
report = json.load(open(json_file))
failures = []
def expect(ok, what):
    if not ok: failures.append(what)
    else: print("ok:", what)

arms = page.tables.get("table-arms", [])
with open(csv_file, newline="") as f:
    csv_rows = list(csv.reader(f))
expect(arms == csv_rows, f"the rendered arms table is arms.csv cell for cell ({len(arms) - 1} rows)")
header = arms[0] if arms else []
col = {name: i for i, name in enumerate(header)}
expect(len(arms) - 1 == len(report["arms"]), f"one row per arm of the JSON report ({len(report['arms'])})")
fmt = lambda v, f: "-" if v is None else format(v, f)
for row, arm in zip(arms[1:], report["arms"]):
    name = f"{arm['model']} {arm['condition']}"
    want = {"model": arm["model"], "condition": arm["condition"], "runs": f"{arm['finished']}/{arm['runs']}",
            "pass rate": f"{100 * arm['pass_rate']:.0f}%", "correct": f"{100 * arm['correctness']:.0f}%"}
    if not arm["design_only"]:
        want["perf score"] = fmt(arm["performance_score"], ".3f")
        want["speedup"] = "-" if arm["speedup"] is None else format(arm["speedup"], ".2f") + "x"
    want["judge"] = fmt(arm["judge"], ".3f")
    got = {k: row[col[k]] for k in want}
    expect(got == want, f"arm {name}: {got}" if got == want else f"arm {name}: rendered {got}, JSON says {want}")
models = {arm["model"] for arm in report["arms"]}
expect('we<i>rd & "quoted"' in models and any(r[0] == 'we<i>rd & "quoted"' for r in arms[1:]),
       "the model named with <, & and \" renders as its own text")
for table in ("cells", "tasks", "paired", "ablation", "all_correct"):
    expect(len(page.tables.get("table-" + table, [])) > 1, f"table {table} rendered with rows")
for figure in ("chart-score", "chart-paired", "chart-ablation", "chart-judge", "hacks", "notes"):
    expect(figure in page.ids, f"#{figure} rendered")
whiskers = sum(1 for d in report["paired"] if d["ratio"] is not None and d["interval95"] is not None)
expect(page.classes.get("whisker", 0) == whiskers, f"{whiskers} whiskers, one per paired interval")
expect(page.classes.get("ablation-line", 0) == len(report["models"]), "an ablation line per model")

png = open(png_file, "rb").read()
width, height = struct.unpack(">II", png[16:24]) if png[:8] == b"\x89PNG\r\n\x1a\n" else (0, 0)
expect((width, height) == (1400, 2000) and len(png) > 20000, f"screenshot {png_file}: {width}x{height}, {len(png)} bytes")
for f in failures: print("FAIL:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
PY
echo "report_html: $(python3 -c "import time; print(f'{time.time() - $STARTED:.1f}')") s; screenshot kept at $WORK/report.png"
