// The templates are the format's documentation in miniature: every field of task.toml with a comment
// saying what it means and the rule the loader or `d2k tasks --check` holds it to. Placeholders that a
// program can spot say TODO; numbers (formulas, tolerances, shapes) are plausible values to replace.
#include "core/scaffold.hpp"

#include <fstream>

#include "core/error.hpp"
#include "core/task.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTaskToml = R"d2k(# @TASK@: the task's name is its folder's path under tasks/; it is written nowhere else.
# Every TODO below is a value to replace, and the numbers are placeholders too. docs/task-format.md
# says what each field means; `d2k tasks --check @TASK@` lists what is still missing.

# One line: what it computes, in which dtypes.
summary = "TODO: one line on what @NAME@ computes (dtypes)"
# The original system(s) and file(s). Write down how the semantics were checked against them (a small
# hand-computed case in a test, or the original's documented behaviour).
source = "TODO: the system and the file it comes from"
# How the eager reference (reference.cpp) is written, in the words of a model author: the way a
# model's code actually does it, never deliberately slow.
baseline = "TODO: the eager PyTorch a model's code runs"
# Only when reference.cpp defines the library path (TaskCode::library): the fused PyTorch path timed as
# a second baseline, in words, e.g. "torch._scaled_mm" or "at::scaled_dot_product_attention".
# library = "TODO"
# Precise enough to implement from without reading the reference: every rounding point, tie rule,
# layout, padding value, and what happens at the edges. Where the original system has a choice, say
# which one and why.
description = """
TODO: what is computed, exactly.
"""
# The axes that shapes and formulas are written in.
axes = ["T", "H"]
# Formulas in the axes: + - * / ( ), integers, ceil_div(a, b), align(a, b), min(a, b), max(a, b).
# FLOPs of one call (the compute floor divides them by the rate of flops_dtype).
flops = "2 * T * H"
# Bytes that must cross DRAM at least once (the memory floor): read the input, write the output.
min_bytes = "2 * T * H + 2 * T * H"
# The matrix rate the FLOPs run at: bf16 (the default), f8e4m3 or i8.
flops_dtype = "bf16"
# true: the same inputs give the same output bytes (no atomics whose order varies); the harness runs
# the solution twice on the same inputs and rejects outputs that differ.
deterministic = true

[[inputs]]
name = "x"
dtype = "bf16"                           # f32 f16 bf16 f8e4m3 f64 i32 i64 i8 u8
shape = ["T", "H"]
# strides = ["H", "1"]                   # optional element strides, one per dimension (row-major when left out)
# layouts.col = ["1", "T"]               # optional named strides that a workload can pick
init = { dist = "normal", std = 1.0 }    # normal | uniform | student_t | ties | randint, drawn like real data
prepare = false                          # true: d2k_prepare may see it (weights); activations stay hidden from prepare
perturb = true                           # the harness may swap elements within a row between timed calls
                                         # (default: a floating dtype and not prepare)

[[outputs]]
name = "y"
dtype = "bf16"
shape = ["T", "H"]
inplace = false                          # true: the input of the same name, updated in place
# Say what exact rounding gives and what a wrong-precision variant gives; the bound sits between.
tolerance = { metric = "numeric", nmse = 1e-5, rtol = 0.016, atol = 0.002 }   # or { metric = "exact" }

# Tolerances of what reference.cpp's comparable() returns beyond the outputs (e.g. dequantized values).
# [compare.y_dequant]
# tolerance = { metric = "numeric", nmse = 1e-4, rtol = 0.1, atol = 0.001 }

[[scalars]]
name = "eps"
type = "float"                           # float | int
value = 1e-6

# Smoke: small shapes (several rows, odd sizes) that the cpu device runs by default and CI runs for
# every task in seconds. At least one.
[[workloads]]
name = "TODO-model-T7"
model = "TODO: the model it comes from"
smoke = true
axes = { T = 7, H = 320 }

# Every workload of the task's list, named after its model, plus at least one adversarial one where
# numerics or structure matter (heavy tails, ties, empty segments, length 1).
[[workloads]]
name = "TODO-model-T2048"
model = "TODO: the model it comes from"
axes = { T = 2048, H = 4096 }
# scalars = { eps = 1e-5 }                            # optional overrides of the scalars
# layouts = { x = "col" }                             # optional layout choices
# inits = { x = { dist = "student_t", df = 3.0 } }    # optional overrides of the inputs' init

# Hidden: never shown to an agent, run by final evaluations and `d2k bench`. At least one, of an odd size.
[[workloads]]
name = "TODO-model-T999"
model = "TODO: the model it comes from"
hidden = true
axes = { T = 999, H = 2048 }
)d2k";

constexpr std::string_view kReference = R"d2k(// @TASK@: the eager reference, as a model's code writes it (TODO: say which model code).
#include "reference/task_code.hpp"

namespace {

class Reference final : public d2k::TaskCode {
 public:
  // The timed eager baseline (the inputs' own dtypes, on the evaluation device) and, on inputs upcast to
  // float64, the oracle: write it for any floating dtype. In-place outputs are updated in `inputs`; the
  // others are returned by name.
  d2k::TensorMap reference(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override {
    d2k::fail("@TASK@: reference.cpp is not written yet (d2k new-task wrote a stub)");
  }

  // Where PyTorch has a fused path (SDPA, _scaled_mm, _int_mm, _grouped_mm, cuBLAS through matmul),
  // define it too and name it in task.toml (`library = "..."`): the library baseline, which the expert
  // must beat.
  //   bool has_library() const override { return true; }
  //   d2k::TensorMap library(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override;
};

}  // namespace

D2K_REGISTER_TASK(Reference);
)d2k";

constexpr std::string_view kGuidanceHead = R"d2k(# Guidance: @TASK@

Written from the expert solution: rationale only, never code, never tuning constants. Each item's
`Check:` is what a reviewer verifies by reading code. docs/guidance-format.md defines the format.
)d2k";

constexpr std::string_view kGuidanceItem = R"d2k(
## L@LEVEL@.@N@ TODO: the title of this @WHAT@ item
Depends on: @DEPENDS@
Check: TODO: what a reviewer looks for in the code.

TODO: @ABOUT@
)d2k";

constexpr std::string_view kLevelAbout[] = {
    "",
    "L1 algorithm: what transformation, why it stays correct, what it saves.",
    "L2 dataflow: where each value lives, for how long, what is reused or skipped.",
    "L3 execution: pipelining, warp roles, vector widths, synchronization order.",
};
constexpr std::string_view kLevelWhat[] = {"", "algorithm", "dataflow", "execution"};

constexpr std::string_view kCudaStub = R"d2k(// @TASK@ on the cuda device: the expert kernel for sm_90a (TODO). Plain CUDA C++ against
// include/d2k/solution.h; no library calls at run time.
#include <cstdio>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "@TASK@: solution/cuda is not written yet (d2k new-task wrote a stub)");
  return 1;
}
)d2k";

constexpr std::string_view kCpuStub = R"d2k(// @TASK@ on the cpu device: a plain host solution that passes the smoke workloads in CI (TODO).
#include <cstdio>

#include "d2k/solution.h"

extern "C" int d2k_run(const d2k_call* call) {
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "@TASK@: solution/cpu is not written yet (d2k new-task wrote a stub)");
  return 1;
}
)d2k";

constexpr std::string_view kNotes = R"d2k(# Kernel notes: @TASK@

## The floor
TODO: per workload: the minimum bytes, the FLOPs and the floor at the ceilings `d2k ceilings` measured.

| workload | axes | min bytes | FLOPs | floor |
| --- | --- | --- | --- | --- |

## Semantics checked against the source
TODO: how the description was checked against the original system (a hand-computed case, its
documented behaviour).

## Design (solution/cuda/)
TODO: the design in a few lines, pointing at guidance.md's items.

## Prediction
TODO: before measuring: the time each workload should take, and why.

## Versions
TODO: each version's time, what was predicted and what happened.

## Measured
TODO: the final version per workload, side by side in one run (`d2k bench --task @TASK@`): its time, %
of speed of light, the eager and the library path's times.

## Profile
TODO: ncu of the final version: DRAM throughput, achieved occupancy, the limiting unit.

## Library path and published figures
TODO: the library path's time, and the best published figure found, with its source.

## Where the bar is missed
TODO: why, with the profile as evidence, and what would close it; or "nowhere".
)d2k";

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Three items per level, each depending on the item before it, or on the level above for the first.
std::string guidance_skeleton() {
  std::string text(kGuidanceHead);
  for (int level = 1; level <= 3; ++level) {
    for (int n = 1; n <= 3; ++n) {
      const std::string depends = n > 1 ? fmt::format("L{}.{}", level, n - 1) : level > 1 ? fmt::format("L{}.1", level - 1) : "none";
      std::string item(kGuidanceItem);
      item = replace_all(item, "@LEVEL@", std::to_string(level));
      item = replace_all(item, "@N@", std::to_string(n));
      item = replace_all(item, "@WHAT@", kLevelWhat[level]);
      item = replace_all(item, "@DEPENDS@", depends);
      text += replace_all(item, "@ABOUT@", kLevelAbout[level]);
    }
  }
  return text;
}

void write_file(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) fail("{}: could not write", path.string());
}

}  // namespace

fs::path scaffold_task(const fs::path& tasks_root, const std::string& name) {
  if (!is_task_name(name)) {
    fail("'{}' is not a task name: <family>/<name>, each part lowercase letters, digits and '_', starting with a "
         "letter (e.g. norm/fused_add_rmsnorm)",
         name);
  }
  if (!fs::is_directory(tasks_root)) fail("{}: the tasks root is not a directory", tasks_root.string());
  const fs::path dir = tasks_root / name;
  if (fs::exists(dir)) fail("{}: already exists; d2k new-task writes only new tasks", dir.string());
  const std::string short_name = name.substr(name.find('/') + 1);
  const auto fill = [&](std::string_view text) {
    return replace_all(replace_all(std::string(text), "@TASK@", name), "@NAME@", short_name);
  };
  write_file(dir / "task.toml", fill(kTaskToml));
  write_file(dir / "reference.cpp", fill(kReference));
  write_file(dir / "guidance.md", fill(guidance_skeleton()));
  write_file(dir / "solution" / "cuda" / (short_name + ".cu"), fill(kCudaStub));
  write_file(dir / "solution" / "cpu" / (short_name + ".cpp"), fill(kCpuStub));
  write_file(dir / "notes.md", fill(kNotes));
  return dir;
}

}  // namespace d2k
