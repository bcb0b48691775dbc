// The data model of a task: what it computes (tensors, scalars, axes), how it is checked (tolerance),
// how fast it could possibly be (FLOP and minimum-byte formulas) and the workloads it is measured on.
// Plain structs; task_loader.cpp fills them from tasks/<family>/<name>/task.toml.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/guidance.hpp"

namespace d2k {

// How the values of one input are drawn. Every workload can override it per input.
struct InputInit {
  std::string dist = "normal";  // normal | uniform | student_t | ties | randint | sparse_groups
  double mean = 0.0;            // normal, student_t, ties, sparse_groups
  double std = 1.0;             // normal, student_t, ties, sparse_groups
  double low = 0.0;             // uniform, randint (inclusive)
  double high = 1.0;            // uniform, randint (exclusive)
  double df = 3.0;              // student_t degrees of freedom (heavy tails)
  double quantum = 0.25;        // ties: values rounded to multiples of this, so equal values recur
  // ties: this share of the nonzero values moved one ulp (of the drawn float32) up or down: distinct
  // values nearer than any rounded function of them (a softmax in fp32) keeps apart.
  double nudge = 0.0;
  // sparse_groups: normal values in groups of `group` consecutive elements (of the row-major tensor), a
  // share of the groups all zero and another share scaled by `tiny`: the all-zero and near-zero groups
  // that a quantizer's eps rule exists for.
  double group = 128;           // a power of two, at most 2^20
  double zero_share = 0.05;
  double tiny_share = 0.05;
  double tiny = 1e-12;
};

// When an output counts as correct.
struct Tolerance {
  enum class Metric { numeric, exact, segments, sample };
  Metric metric = Metric::numeric;
  // numeric: every element must satisfy |got - want| <= atol * rms(want) + rtol * |want|, and the
  // normalized mean squared error sum((got - want)^2) / sum(want^2) must be at most nmse.
  double nmse = 1e-5;
  double rtol = 1e-2;
  double atol = 1e-3;
  // The rms that atol scales: of the whole output, or of each element's row (the last dimension) for an
  // output whose rows carry their own magnitude (a GEMM's tokens): there a row ten times the typical one
  // has ten times the rounding error, and the whole output's rms would hold it to the typical row's.
  enum class AtolScale { output, row };
  AtolScale atol_scale = AtolScale::output;
  // numeric, for an output the specification rounds once from an exact value: at most this share of the
  // elements may differ from the oracle rounded to the output's dtype (to nearest, ties to even). Catches
  // a rounding mode that the statistics above cannot tell from a correct one (truncation).
  std::optional<double> misrounded;
  // segments, for a 1-D integer output whose order is free within segments (moe/align_block_size's
  // sorted_token_ids): the output is cut into blocks of `block` elements (a formula in the axes), and
  // consecutive blocks that the oracle's `labels` output (another 1-D output, one label per block) labels
  // alike form one segment. Within a segment the values other than `pad` (a formula in the axes) must be
  // the oracle's in any order, and `pad` must stand exactly where the oracle's does
  // (reference/compare_segments.hpp).
  std::string labels;
  std::string block;
  std::string pad;
  // sample, for an integer output drawn at random (sample/top_k_top_p's token ids): the oracle is the
  // distribution each element is drawn from (TaskCode::distribution, one more dimension than the output).
  // Every call's elements must lie in that distribution's support; besides the checked call, the
  // harness makes `calls` (a formula in the axes) more calls on the first draw, each with the int scalar
  // `seed` set to a fresh value, and their draws must follow the distribution (reference/sample_test.hpp).
  std::string seed;
  std::string calls;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::string> shape;  // one formula per dimension, in the task's axes
  // Optional element strides, one formula per dimension; row-major when empty. `layouts` holds named
  // alternatives that a workload can pick (e.g. column-major scales).
  std::vector<std::string> strides;
  std::map<std::string, std::vector<std::string>> layouts;
  InputInit init;        // inputs only
  // Inputs only: d2k_prepare may see this input (weights it re-lays out once); the others hold poison
  // during prepare, so that no activation can be precomputed outside the timed calls.
  bool prepare = false;
  // Inputs only: before every timed call the harness swaps a few elements within a row of this input
  // (core/call_patch.hpp), so that every timed call computes on values it cannot predict. The loader's
  // default: a floating dtype and not `prepare`.
  bool perturb = false;
  // Inputs only, optional: perturb by relabelling instead (core/call_patch.hpp): a formula in the axes and
  // integer scalars for
  // the block of the last dimension within which positions swap, the same swaps in every row and in every
  // input relabelled alike. Empty: element swaps within a row.
  std::string relabel;
  bool inplace = false;  // outputs only: the output is the input of the same name, updated in place
  Tolerance tolerance;   // outputs only
};

struct ScalarSpec {
  std::string name;
  bool is_int = false;
  double value = 0.0;  // the default; a workload can override it
};

struct Workload {
  std::string name;         // named after the real model, e.g. "llama3-8b-T2048"
  std::string model;        // the model it comes from, free text
  // Never shown to an agent; run only by final evaluations (`d2k eval --final`) and `d2k bench`, so
  // that a solution cannot special-case the shapes it was shown.
  bool hidden = false;
  // Small shapes the cpu device runs by default (CI runs every task's cpu solution on them in seconds);
  // the cuda device runs every workload.
  bool smoke = false;
  std::map<std::string, int64_t> axes;
  std::map<std::string, double> scalars;          // overrides of ScalarSpec::value
  std::map<std::string, std::string> layouts;     // tensor name -> layout name
  std::map<std::string, InputInit> inits;         // input name -> override of its InputInit
};

struct Task {
  std::string name;  // "<family>/<name>", e.g. "norm/fused_add_rmsnorm": the folder under the tasks root
  std::filesystem::path dir;
  std::string summary;      // one line
  std::string description;  // what it computes, markdown
  std::string source;       // the system it comes from
  std::string baseline;     // how the eager reference is written
  // The fused PyTorch path timed as a second baseline, in words (e.g. "torch._scaled_mm"); set exactly
  // when reference.cpp defines TaskCode::library(). Empty: the task has none.
  std::string library;
  std::vector<std::string> axes;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<ScalarSpec> scalars;
  std::string flops;      // formula in the axes
  std::string min_bytes;  // formula in the axes: bytes that must cross DRAM at least once
  // The matrix rate the FLOPs run at, for the compute floor: bf16 (the default), f8e4m3 or i8.
  DType flops_dtype = DType::bf16;
  // The same inputs give the same output bytes on every call (no atomics whose order varies): the
  // harness runs the correctness call twice and rejects a solution whose outputs differ.
  bool deterministic = false;
  std::vector<Workload> workloads;
  // Tolerances of what TaskCode::comparable() returns beyond the outputs ([compare.<name>] tables).
  std::map<std::string, Tolerance> compare;
  Guidance guidance;

  const Workload* find_workload(const std::string& name) const;
  const TensorSpec* find_input(const std::string& name) const;
  const TensorSpec* find_output(const std::string& name) const;
  // The output compared with metric 'sample' (at most one), or nullptr.
  const TensorSpec* sampled_output() const;
  // The tolerance a compared tensor is held to: its [compare.<name>] table, else the output's own;
  // nullptr when neither exists.
  const Tolerance* tolerance_for(const std::string& name) const;
};

// "<family>/<name>", each part lowercase letters, digits and '_', starting with a letter: a folder
// name, a C string in a compile definition and a command-line argument alike.
bool is_task_name(std::string_view name);

// A tensor's concrete geometry for one workload.
struct Geometry {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t numel() const;
  int64_t span() const;  // elements from the first to one past the last addressable element
};

// Evaluates a tensor's shape and strides (with the workload's layout choice) in the workload's axes.
Geometry geometry_of(const TensorSpec& spec, const Workload& workload);
// The relabel block of an input for one workload (0 when it is not relabelled), its formula evaluated in the
// axes and the integer scalars; throws d2k::Error unless it is a whole number of at least 2 that divides
// the last dimension.
int64_t relabel_block_of(const Task& task, const TensorSpec& spec, const Workload& workload);
double flops_of(const Task& task, const Workload& workload);
double min_bytes_of(const Task& task, const Workload& workload);
// The workload's value for every scalar (its override or the task default).
std::vector<std::pair<const ScalarSpec*, double>> scalars_of(const Task& task, const Workload& workload);
InputInit init_of(const TensorSpec& input, const Workload& workload);

}  // namespace d2k
