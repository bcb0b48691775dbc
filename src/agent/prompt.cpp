#include "agent/prompt.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

#include "agent/workspace.hpp"
#include "core/error.hpp"
#include "core/guidance.hpp"
#include "runner/triton.hpp"

namespace d2k::agent {
namespace {

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string file_text(const std::filesystem::path& file) {
  auto text = read_whole_file(file);
  if (!text) fail("the prompt needs {}, which cannot be read", file.string());
  return *text;
}

std::string describe_init(const InputInit& init) {
  if (init.dist == "normal") return fmt::format("normal(mean {:g}, std {:g})", init.mean, init.std);
  if (init.dist == "uniform") return fmt::format("uniform[{:g}, {:g})", init.low, init.high);
  if (init.dist == "student_t") return fmt::format("student-t(df {:g}, std {:g}), heavy-tailed", init.df, init.std);
  if (init.dist == "ties") return fmt::format("normal(mean {:g}, std {:g}) rounded to multiples of {:g} (ties recur)", init.mean, init.std, init.quantum);
  if (init.dist == "randint") return fmt::format("integers in [{:g}, {:g})", init.low, init.high);
  return init.dist;
}

std::string describe_tolerance(const Tolerance& t) {
  if (t.metric == Tolerance::Metric::exact) return "exact: every element must equal the reference";
  if (t.metric == Tolerance::Metric::sample)
    return fmt::format("sampled: every draw must lie in the allowed set; over many calls, each with a fresh '{}', the "
                       "draws must follow the task's distribution (and one seed must always give the same draws)", t.seed);
  const char* rms = t.atol_scale == Tolerance::AtolScale::row ? "rms(the reference's row)" : "rms(reference)";
  return fmt::format("every element within atol * {} + rtol * |reference| (atol {:g}, rtol {:g}), "
                     "and normalized mean squared error at most {:g}", rms, t.atol, t.rtol, t.nmse);
}

std::string tensor_line(const TensorSpec& spec, bool output) {
  std::string line = fmt::format("- `{}`: {} [{}]", spec.name, name_of(spec.dtype), join(spec.shape));
  if (!spec.strides.empty()) line += fmt::format(", strides [{}]", join(spec.strides));
  for (const auto& [layout, strides] : spec.layouts) line += fmt::format("; layout `{}`: strides [{}]", layout, join(strides));
  if (output) {
    if (spec.inplace) line += ", in place (the input of the same name, updated)";
    line += fmt::format("; tolerance: {}", describe_tolerance(spec.tolerance));
  } else {
    line += fmt::format("; values {}", describe_init(spec.init));
  }
  return line;
}

std::string workload_line(const Task& task, const Workload& w) {
  std::vector<std::string> parts;
  for (const auto& axis : task.axes)
    if (auto it = w.axes.find(axis); it != w.axes.end()) parts.push_back(fmt::format("{}={}", axis, it->second));
  std::string line = fmt::format("- `{}` ({}): {}", w.name, w.model, join(parts));
  for (const auto& [name, value] : w.scalars) line += fmt::format(", {}={:g}", name, value);
  for (const auto& [tensor, layout] : w.layouts) line += fmt::format("; `{}` in layout `{}`", tensor, layout);
  for (const auto& [input, init] : w.inits) line += fmt::format("; `{}` values {}", input, describe_init(init));
  return line;
}

std::string fence(const std::string& language, const std::string& text) {
  return fmt::format("```{}\n{}{}```\n", language, text, text.empty() || text.back() == '\n' ? "" : "\n");
}

}  // namespace

std::string task_sheet(const Task& task, const std::vector<const Workload*>& workloads) {
  std::string s = fmt::format("# Task {}\n\n{}\n\nSource: {}\n\n{}\n", task.name, task.summary, task.source, task.description);
  s += fmt::format("\n## Interface\n\nAxes: {}\n\nInputs:\n", join(task.axes));
  for (const auto& spec : task.inputs) s += tensor_line(spec, false) + "\n";
  s += "\nOutputs:\n";
  for (const auto& spec : task.outputs) s += tensor_line(spec, true) + "\n";
  for (const auto& [name, tolerance] : task.compare) s += fmt::format("- compared as `{}`: {}\n", name, describe_tolerance(tolerance));
  if (!task.scalars.empty()) {
    s += "\nScalars:\n";
    for (const auto& scalar : task.scalars)
      s += fmt::format("- `{}`: {}, default {:g}\n", scalar.name, scalar.is_int ? "int" : "float", scalar.value);
  }
  s += fmt::format("\nFLOPs: {}; minimum bytes moved: {} (the speed-of-light floors)\n", task.flops, task.min_bytes);
  s += "\n## Workloads\n\nYour solution is checked and timed on these. The final evaluation also runs other workloads "
       "you are not shown, with fresh random inputs: any shape the interface allows must work.\n\n";
  for (const auto* w : workloads) s += workload_line(task, *w) + "\n";
  s += fmt::format("\nThe eager baseline: {}\n", task.baseline);
  return s;
}

namespace {

// "CUTLASS 4.2.0 and CuTe", from the headers' cutlass/version.h; "CUTLASS and CuTe" where it cannot be read.
std::string cutlass_release(const std::filesystem::path& include_dir) {
  std::ifstream in(include_dir / "cutlass" / "version.h");
  std::map<std::string, std::string> parts;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string define, name, value;
    if (words >> define >> name >> value && define == "#define" &&
        (name == "CUTLASS_MAJOR" || name == "CUTLASS_MINOR" || name == "CUTLASS_PATCH"))
      parts[name] = value;
  }
  if (parts.size() != 3) return "CUTLASS and CuTe";
  return fmt::format("CUTLASS {}.{}.{} and CuTe", parts["CUTLASS_MAJOR"], parts["CUTLASS_MINOR"], parts["CUTLASS_PATCH"]);
}

// The Triton launcher interface (docs/abi.md, "Triton solutions"), as a kernel writer needs it.
constexpr const char* kTritonInterface = R"(A solution is Python: `solution.py` in the workspace (with any other `.py` modules it imports) holding `@triton.jit` kernels and a launcher, run with Triton {} on the cuda device (sm_90a):

- `launch(<inputs>, <outputs not in place>, <scalars>, workspace)` (required, timed): launches the kernels that compute the outputs.
- `workspace_size(<inputs>, <outputs not in place>, <scalars>)` (optional, untimed): the scratch bytes `launch` needs for these shapes.

The arguments come by keyword under the task's names above: the same tensors, dtypes, shapes, strides and scalars as the interface lists, in place where it says so (an in-place output is its input's object, holding the input's values), `workspace` a `uint8` tensor of the asked size or `None`. A tensor is d2k's own object, not a torch tensor: `data_ptr()`, `dtype` (a `triton.language` dtype: `tl.bfloat16`, `tl.float8e4nv`, `tl.float32`, `tl.int32`, ...), `shape` (a tuple), `stride()`/`stride(d)`, `size()`, `dim()`/`ndim`, `numel()`, `element_size()`, `is_contiguous()`, `name`; pass it to a kernel as a pointer argument. Ints are Python ints, floats Python floats. Kernels launch on the harness's stream. An exception is the call's error.

Rules:
- Imports: `triton` (and its submodules), your own modules, and `math`, `functools`, `itertools`, `operator`, `typing`, `dataclasses`, `enum`, `__future__`, `collections`, `abc`. Any other import (torch, numpy, ctypes, ...) rejects the solution: no library may do the work, and torch is not there.
- Kernels are compiled ahead of time, never in a call: `compile` (and every check) calls `launch` once per workload on placeholder tensors of its shapes and compiles each kernel it launches. A kernel whose specialization differs in a timed call (an int argument whose value varies from call to call: mark it `do_not_specialize`) fails.
- No `@triton.autotune` (it needs torch's benchmarker): choose the configuration in the launcher from the shapes; `@triton.heuristics` works.
- No memory of your own: scratch memory is the workspace.
)";

}  // namespace

Prompt build_prompt(const PromptInputs& in) {
  if (!in.task) fail("build_prompt: no task");
  const Task& task = *in.task;
  const bool design = in.condition == Condition::design_only;
  const bool cuda = in.device == Device::cuda;
  const bool triton = in.language == Language::triton;
  if (triton && !cuda) fail("build_prompt: the {} device has no Triton backend", name_of(in.device));
  Prompt prompt;

  std::string& sys = prompt.system;
  if (design) {
    sys = "You are an expert GPU kernel engineer. You are asked to design a kernel for an operator from an LLM "
          "inference system, as a design document, not code.\n";
  } else {
    sys = fmt::format("You are an expert GPU kernel engineer. You are asked to write a kernel{} for an operator from an "
                      "LLM inference system that is correct on every workload and as fast as you can make it.\n",
                      triton ? " in Triton" : "");
  }
  sys += "\nYou work only through the tools below, in a workspace folder of your own. Every response of yours "
         "should call at least one tool; a response without a tool call, a call of an unknown tool or one with "
         "arguments that are not valid JSON counts as a format error, and 5 in a row end the run.\n\n## Tools\n\n";
  for (const auto& tool : in.tools) sys += fmt::format("- `{}`: {}\n", tool.name, tool.description);
  sys += fmt::format("\n## Budget\n\n{}. ", describe(in.budget));
  if (design) {
    sys += "When the budget ends before you submit, the run ends without a design.\n";
  } else {
    sys += "When the budget ends before you submit, your best correct solution so far (the fastest one "
           "`benchmark` measured correct, else the last one `check` passed) is submitted for you.\n";
  }

  std::string& user = prompt.user;
  user = task_sheet(task, in.workloads);
  user += "\n## The reference\n\nThe operator as its eager reference computes it (libtorch C++; in float64 it is also "
          "the correctness oracle):\n\n";
  user += fence("cpp", file_text(task.dir / "reference.cpp"));
  if (!design && triton) {
    user += "\n## The solution interface (Triton)\n\n";
    user += fmt::format(kTritonInterface, kTritonVersion);
    user += "\nThe smallest complete solution (of another operator: y = 2 * x, with tensors `x` and `y`):\n\n";
    user += fence("python", file_text(in.root / "examples" / "minimal" / "scale.py"));
  } else if (!design) {
    user += "\n## The solution ABI\n\nA solution is a shared object exporting `d2k_run` (and optionally "
            "`d2k_workspace_size`, `d2k_prepare`, `d2k_release`) from this header, included as "
            "`#include \"d2k/solution.h\"`:\n\n";
    user += fence("c", file_text(in.root / "include" / "d2k" / "solution.h"));
    user += "\nThe smallest complete solution (of another operator: y = 2 * x):\n\n";
    user += fence("cpp", file_text(in.root / "examples" / "minimal" / "scale.cpp"));
  }
  user += fmt::format("\n## The device\n\n{} ({} device): measured copy bandwidth {:.0f} GB/s (read + write), read "
                      "bandwidth {:.0f} GB/s",
                      in.device_name, name_of(in.device), in.ceiling.copy_gbps, in.ceiling.read_gbps);
  if (in.ceiling.bf16_tflops) user += fmt::format(", dense bf16 matrix rate {:.0f} TFLOP/s", *in.ceiling.bf16_tflops);
  if (in.ceiling.fp8_tflops) user += fmt::format(", fp8 {:.0f} TFLOP/s", *in.ceiling.fp8_tflops);
  if (in.ceiling.int8_tops) user += fmt::format(", int8 {:.0f} TOPS", *in.ceiling.int8_tops);
  user += ".\n";
  if (!design && triton) {
    user += "Solutions are Triton: the workspace's solution.py (and the .py modules it imports) is the solution; "
            "tensors are in GPU memory and kernels run on the harness's stream. Only Triton kernels may compute the "
            "result.\n";
  } else if (!design) {
    user += cuda ? "Solutions are CUDA C++: the workspace's .cu files (with any .h/.cuh headers) are compiled together "
                   "with nvcc for sm_90a into one shared object; tensors are in GPU memory and calls run on the given stream.\n"
                 : "Solutions are host C++: the workspace's .cpp files (with any .h/.hpp headers) are compiled together "
                   "into one shared object; tensors are in host memory.\n";
    if (cuda && !in.cutlass_include_dir.empty())
      user += fmt::format("The {} headers are on the include path (`#include <cute/tensor.hpp>`, "
                          "`#include <cutlass/gemm/collective/collective_builder.hpp>`, ...: header-only, not "
                          "`cutlass/util`); no library may be called at run time.\n",
                          cutlass_release(in.cutlass_include_dir));
  }

  const auto levels = levels_of(in.condition);
  if (!levels.empty()) {
    prompt.guidance = "\n## Expert design\n\nAn expert's design for this operator, as items at the levels given "
                      "(L1 algorithm, L2 dataflow, L3 execution), each after the items it depends on. It describes "
                      "what a fast, correct kernel does and why; it is not code.\n\n" +
                      render_guidance(task.guidance, levels);
    user += prompt.guidance;
  }

  user += "\n## What to do\n\n";
  if (design) {
    user += "Write a design document for a fast CUDA kernel of this operator on this GPU, in `design.md` in your "
            "workspace, in three sections: `## L1 algorithm` (what transformation, why it stays correct, what it "
            "saves), `## L2 dataflow` (where each value lives and for how long, what is reused or skipped) and "
            "`## L3 execution` (pipelining, thread and warp roles, vector widths, synchronization). Give "
            "rationale, not code. Then call `submit`.\n";
  } else {
    user += triton ? "Write your solution as Triton in `solution.py` in the workspace, `compile` it,"
                     " `check` it until every workload passes, `benchmark` it and improve it, then call `submit`. "
                     "TASK.md in the workspace repeats the task above.\n"
                   : "Write your solution in the workspace, `compile` it, `check` it until every workload passes, "
            "`benchmark` it and improve it, then call `submit`. TASK.md in the workspace repeats the task above.\n";
  }
  return prompt;
}

}  // namespace d2k::agent
