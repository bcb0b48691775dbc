# `d2k agent --language cuda|triton` without a GPU: a scripted run on the cpu device in the cuda language
# (host C++) goes as before and records its language; the cpu device refuses Triton, naming both, before
# any model is asked; an unknown language is named; a resume keeps the run's language.
source "$(dirname "$0")/agent_lib.bash"

# refused EXIT FRAGMENT COMMAND...: COMMAND exits EXIT and says FRAGMENT.
refused() {
  local code=$1 fragment=$2; shift 2
  set +e; out=$("$@" 2>&1); local rc=$?; set -e
  expect_eq "$rc" "$code" "'$*': exit code"
  case "$out" in *"$fragment"*) echo "ok: it says '$fragment'";; *) fail_now "'$*': no '$fragment' in: $out";; esac
}

# The cpu device has no Triton backend: refused before the models file is read or a run folder made.
refused 2 "--language triton with --device cpu: the cpu device has no Triton backend" \
  "$D2K" agent "${AGENT_OPTS[@]}" --language triton --model scripted --models "$WORK/none.toml" --runs-dir "$WORK/refused-runs"
[ ! -e "$WORK/refused-runs" ] || fail_now "a refused run made its runs folder"
refused 2 "--language: unknown language 'rust' (cuda, triton)" \
  "$D2K" agent "${AGENT_OPTS[@]}" --language rust --model scripted --models "$WORK/none.toml" --runs-dir "$WORK/refused-runs"

# The cuda language on the cpu device: the story as before (host C++), and run.json records it.
start_server cuda openai story
expect_exit 0 "$D2K" agent "${AGENT_OPTS[@]}" --language cuda --model scripted --models "$WORK/cuda.toml" --runs-dir "$WORK/runs"
stop_server
run=$(the_run "$WORK/runs")
expect_eq "$(final_field "$run" status)" '"submitted"' "status"
expect_eq "$(final_field "$run" passed)" true "final evaluation passed"
python3 - "$run" <<'PY'
import json, sys
run = sys.argv[1]
settings = json.load(open(f"{run}/run.json"))
assert settings["language"] == "cuda", settings
assert json.load(open(f"{run}/result.json"))["language"] == "cuda"
prompt = next(json.loads(l) for l in open(f"{run}/transcript.jsonl") if json.loads(l)["type"] == "prompt")
text = json.dumps(prompt)
assert "Solutions are host C++" in text and "d2k_run" in text, "the C ABI for the cpu device"
assert "Triton" not in text, "no Triton in a cuda run's prompt"
print("ok: run.json and result.json language cuda; the prompt shows the C ABI and no Triton")
PY
# A resume keeps the language: the same is accepted (the run has ended: it is reported), another refused.
expect_exit 0 "$D2K" agent --resume "$run" --language cuda
refused 2 "--language \"triton\": the run has language = \"cuda\" (run.json)" "$D2K" agent --resume "$run" --language triton
