// Eager reference for attn/merge_states, as vLLM's tests write merge_attn_states in PyTorch: the LSEs with
// +inf made -inf, their max, the two exponentials and their sum, the merged LSE, the weights turned to
// [N, H, 1] and the weighted sum of the two outputs. On bf16 outputs and fp32 LSEs the products promote to
// fp32 and the result is rounded once to bf16; with float64 inputs (the oracle) nothing is rounded.
//
// make_inputs draws every value from task.toml's distributions with d2k's own generator, then gives N - F
// random tokens one empty part (-inf or +inf over all their heads), never both parts of one token.
#include <limits>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// FlashAttention 2 writes +inf for a part without keys, FlashAttention 3 -inf: both mean weight 0.
at::Tensor empty_as_minus_inf(const at::Tensor& lse) { return lse.masked_fill(lse == kInf, -kInf); }

// The task's inputs as task.toml's distributions alone give them: d2k's generic draw, which runs for a
// task code that has no make_inputs of its own.
class Declared final : public TaskCode {
 public:
  TensorMap reference(TensorMap&, const Scalars&) const override {
    fail("attn/merge_states: the stand-in that draws the declared inputs has no reference");
  }
};

class MergeStates : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override {
    const at::Tensor& prefix_output = inputs.at("prefix_output");
    const at::Tensor& suffix_output = inputs.at("suffix_output");
    const at::Tensor p_lse = empty_as_minus_inf(inputs.at("prefix_lse"));
    const at::Tensor s_lse = empty_as_minus_inf(inputs.at("suffix_lse"));
    const at::Tensor max_lse = at::maximum(p_lse, s_lse);
    const at::Tensor p_se = at::exp(p_lse - max_lse);
    const at::Tensor s_se = at::exp(s_lse - max_lse);
    const at::Tensor out_se = p_se + s_se;
    const at::Tensor output_lse = at::log(out_se) + max_lse;
    // [H, N] -> [N, H, 1], against the outputs' [N, H, D].
    const at::Tensor p_scale = (p_se / out_se).t().unsqueeze(-1);
    const at::Tensor s_scale = (s_se / out_se).t().unsqueeze(-1);
    const at::Tensor output = prefix_output * p_scale + suffix_output * s_scale;
    return {{"output", output.to(prefix_output.scalar_type())}, {"output_lse", output_lse}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload,
                                       at::Generator& gen) const override {
    const int64_t tokens = workload.axes.at("N"), full = workload.axes.at("F");
    if (full > tokens)
      fail("attn/merge_states: workload '{}' has F = {} tokens with both parts, more than its N = {}", workload.name,
           full, tokens);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    TensorMap inputs = d2k::make_inputs(task, Declared(), workload, seed);

    // The empty tokens in a random order: the i-th empties its prefix (i even) or its suffix (i odd), with
    // -inf (i % 4 < 2) or +inf, so that every workload with four or more has each kind.
    const auto order = at::randperm(tokens, gen, i64);
    for (int64_t i = 0; i < tokens - full; ++i) {
      const int64_t token = order[i].item<int64_t>();
      at::Tensor& lse = inputs.at(i % 2 == 0 ? "prefix_lse" : "suffix_lse");
      lse.select(1, token).fill_(i % 4 < 2 ? -kInf : kInf);
    }
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::MergeStates);
