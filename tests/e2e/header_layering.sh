# Layering: no ATen (libtorch) header is reachable from src/cli/*.hpp or src/agent/*.hpp, so that the
# command line and the agent compile without torch's headers wherever they are included. Each header is
# run through the compiler's -M with the include flags the build gives src/cli/ (torch's among them),
# and its dependency list must not name ATen or torch. A header known to include ATen must be caught,
# so that the check cannot pass for want of finding anything.
source "$(dirname "$0")/lib.bash"
db="$(dirname "$D2K")/../compile_commands.json"  # D2K is <build>/src/d2k
[ -f "$db" ] || { echo "FAIL: no $db (CMAKE_EXPORT_COMPILE_COMMANDS)" >&2; exit 1; }
python3 - "$db" "$D2K_ROOT" "$WORK" <<'PY'
import glob, json, os, shlex, subprocess, sys
db, root, work = sys.argv[1:]
entry = next(e for e in json.load(open(db)) if "/src/cli/" in e["file"])
argv = shlex.split(entry["command"]) if "command" in entry else entry["arguments"]
if os.path.basename(argv[0]) == "ccache":
    argv = argv[1:]
compiler, flags, skip = argv[0], [], False
for arg in argv[1:]:
    if skip:
        skip = False
    elif arg in ("-o", "-MF", "-MT", "-MQ"):
        skip = True
    elif arg in ("-c", "-MD", "-MMD", entry["file"]):
        pass
    else:
        flags.append(arg)

def torch_dependencies(header):
    # -M: every header the file reaches, system ones included (torch's are -isystem).
    run = subprocess.run([compiler, *flags, "-x", "c++", "-M", "-MF", os.path.join(work, "deps.txt"), header],
                         cwd=entry["directory"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"FAIL: {header} does not preprocess:\n{run.stderr}")
    deps = open(os.path.join(work, "deps.txt")).read().replace("\\\n", " ").split()[1:]
    return [d for d in deps if "/ATen/" in d or "/torch/" in d]

control = os.path.join(root, "src/reference/task_code.hpp")
if not torch_dependencies(control):
    sys.exit(f"FAIL: the check finds no ATen header behind {control}, which includes one")
headers = sorted(glob.glob(os.path.join(root, "src/cli/*.hpp")) + glob.glob(os.path.join(root, "src/agent/*.hpp")))
bad = {h: torch_dependencies(h) for h in headers}
bad = {h: deps for h, deps in bad.items() if deps}
for header, deps in bad.items():
    print(f"FAIL: {os.path.relpath(header, root)} reaches {len(deps)} torch headers, e.g. {deps[0]}", file=sys.stderr)
if bad:
    sys.exit(1)
print(f"ok: none of {len(headers)} cli/ and agent/ headers reaches ATen (the control {os.path.relpath(control, root)} does)")
PY
