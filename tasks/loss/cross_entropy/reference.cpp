// Eager reference for loss/cross_entropy, as a training loop writes the loss and its gradient without a
// fused kernel: logits.float(), log_softmax, the target's log-probability gathered (0 for an ignored row),
// then the gradient of the mean over the counted rows, (softmax - onehot(target)) / count, cast back into
// the logits. With float64 inputs (the oracle) nothing is rounded until the comparison.
//
// make_inputs draws what a language model's last layer holds: logits of a given spread, a few outliers per
// row where the workload asks for them (axis O), the target's logit placed so that the per-token losses spread from
// near 0 to over 10 nats (a trained model is confident on some tokens, lost on others), and a given number
// of rows ignored (-100) at random (N - K).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "core/splitmix.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr int64_t kIgnoreIndex = -100;

// Rows drawn per generator: about a million values, whatever V, so that the draw is parallel and the same
// on any number of threads.
int64_t rows_per_chunk(int64_t vocab) { return std::max<int64_t>(1, (int64_t{1} << 20) / vocab); }

class CrossEntropy : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    at::Tensor& logits = inputs.at("logits");
    const at::Tensor& targets = inputs.at("targets");
    const auto wide = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const auto log_probs = at::log_softmax(logits.to(wide), 1);
    const auto counted = targets != kIgnoreIndex;
    const auto index = at::where(counted, targets, 0).unsqueeze(1);
    const auto loss = at::where(counted, -log_probs.gather(1, index).squeeze(1), 0.0);
    // d(mean loss)/d(logits): (softmax - onehot) / count on a counted row, 0 on an ignored one. With every
    // row ignored the mean is 0/0; its gradient is 0 everywhere (autograd's too).
    const auto count = counted.sum().clamp_min(1).to(wide);
    auto grad = log_probs.exp();
    grad.scatter_add_(1, index, at::full({grad.size(0), 1}, -1.0, grad.options()));
    grad.mul_((counted.to(wide) / count).unsqueeze(1));
    logits.copy_(grad);
    return {{"loss", loss}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload,
                                       at::Generator& gen) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    // K rows counted, the rest ignored; O entries per row placed: the target's and O - 1 outliers.
    const int64_t rows = axis("N"), vocab = axis("V"), counted = axis("K"), outliers = axis("O") - 1;
    if (counted > rows) fail("loss/cross_entropy: workload '{}' counts {} of {} rows", workload.name, counted, rows);
    const int64_t ignored = rows - counted;
    const InputInit init = init_of(*task.find_input("logits"), workload);
    if (init.dist != "normal")
      fail("loss/cross_entropy: make_inputs draws normal logits (and the outliers of axis O), not '{}'", init.dist);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());

    auto logits = at::empty({rows, vocab}, at::TensorOptions().dtype(at::kBFloat16));
    auto targets = at::empty({rows}, i64);
    const int64_t chunk = rows_per_chunk(vocab);
    at::parallel_for(0, (rows + chunk - 1) / chunk, 1, [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        auto g = at::make_generator<at::CPUGeneratorImpl>(splitmix_finalize(seed + kSplitMixIncrement * (c + 1)));
        const int64_t r = std::min(chunk, rows - c * chunk);
        auto x = at::normal(init.mean, init.std, {r, vocab}, g, f32);
        if (outliers > 0) {
          // A few entries per row at 30 to 60 standard deviations either side: above about 88 an fp32
          // exp overflows, so a kernel that skips the max subtraction gives inf.
          const auto where = at::randint(0, vocab, {r, outliers}, g, i64);
          const auto size = at::empty({r, outliers}, f32).uniform_(30.0, 60.0, g) * init.std;
          const auto sign = at::empty({r, outliers}, f32).bernoulli_(0.5, g) * 2.0 - 1.0;
          x.scatter_(1, where, init.mean + sign * size);
        }
        // The target's logit is the row's logsumexp plus L ~ N(1, 4): p(target) is about sigmoid(L), losses
        // of a few hundredths to over ten nats, a mean near 1.5.
        const auto target = at::randint(0, vocab, {r, 1}, g, i64);
        const auto margin = at::normal(1.0, 4.0, {r, 1}, g, f32);
        x.scatter_(1, target, at::logsumexp(x, {1}, true) + margin);
        logits.narrow(0, c * chunk, r).copy_(x);
        targets.narrow(0, c * chunk, r).copy_(target.squeeze(1));
      }
    });
    if (ignored > 0) targets.index_fill_(0, at::randperm(rows, gen, i64).narrow(0, 0, ignored), kIgnoreIndex);
    return TensorMap{{"logits", logits}, {"targets", targets}};
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::CrossEntropy);
