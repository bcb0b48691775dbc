// sample/top_k_top_p: top-k then top-p on the renormalized rest, then one draw per row, as a model author
// writes it in eager PyTorch (sort, cumsum, mask, multinomial with a generator seeded from the seed).
//
// distribution() is the oracle of the token ids: the exact truncated distribution in float64, the tie
// rules of task.toml applied by value. make_inputs draws what a language model's softmax holds (a few
// heavy tokens over a long tail), per-row k and p, and places each p at least kMargin away from every
// cumulative mass of its row, so that no rounding of a correct fp32 implementation can move a token
// across the top-p boundary.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include "core/splitmix.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

// How far every p lies from the cumulative masses of its row (in the renormalized top-k set): far above
// what fp32 sums over a row (about 1e-6 relative) can get wrong.
constexpr double kMargin = 1e-4;

// k as the filter uses it: 0 or at least V means no top-k (every value).
at::Tensor effective_k(const at::Tensor& top_k, int64_t vocab) {
  const auto k = top_k.to(at::kLong);
  return at::where((k <= 0) | (k >= vocab), vocab, k);
}

at::Generator seeded_generator(const at::Device& device, uint64_t seed) {
  at::Generator gen = device.is_cuda() ? at::detail::getCUDAHooks().getNewGenerator(device.index())
                                       : at::make_generator<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
  return gen;
}

class TopKTopP final : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& probs = inputs.at("probs");
    const int64_t vocab = probs.size(1);
    auto [sorted, order] = probs.sort(/*dim=*/-1, /*descending=*/true);
    // top-k: every value at least the k-th largest (ties at the k-th place stay in).
    const auto kth = sorted.gather(1, effective_k(inputs.at("top_k"), vocab).sub(1).unsqueeze(1));
    auto kept = at::where(sorted >= kth, sorted, 0.0);
    // top-p on the renormalized rest: keep while the mass before a token is below p.
    const auto renormalized = kept / kept.sum({-1}, /*keepdim=*/true);
    const auto before = renormalized.cumsum(-1) - renormalized;
    const auto p = inputs.at("top_p").unsqueeze(1);
    kept = at::where((before < p) | (p >= 1), kept, 0.0);
    auto gen = seeded_generator(probs.device(), static_cast<uint64_t>(scalars.i("seed")));
    const auto choice = at::multinomial(kept, 1, /*replacement=*/false, gen);
    return {{"token_ids", order.gather(1, choice).squeeze(1)}};
  }

  // The exact distribution, by value: a tie group at the k-th place is kept whole, and so is a tie
  // group at the top-p boundary when the mass strictly above it is below p (its first member's
  // exclusive cumsum, whatever the order inside the group).
  TensorMap distribution(const TensorMap& inputs, const Scalars&) const override {
    const auto probs = inputs.at("probs").to(at::kDouble);
    const int64_t vocab = probs.size(1);
    auto [sorted, order] = probs.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
    const auto kth = sorted.gather(1, effective_k(inputs.at("top_k"), vocab).sub(1).to(sorted.device()).unsqueeze(1));
    auto kept = at::where(sorted >= kth, sorted, 0.0);
    const auto q = kept / kept.sum({-1}, /*keepdim=*/true);
    const auto before = q.cumsum(-1) - q;
    // The mass strictly above each value: the exclusive cumsum where its tie group starts. Cumsums only
    // grow along the row, so the running maximum of the group starts' values is the current group's.
    auto starts = at::ones_like(sorted, at::kBool);
    starts.narrow(1, 1, vocab - 1).copy_(sorted.narrow(1, 1, vocab - 1) != sorted.narrow(1, 0, vocab - 1));
    const auto above = std::get<0>(at::where(starts, before, -1.0).cummax(1));
    const auto p = inputs.at("top_p").to(at::kDouble).to(sorted.device()).unsqueeze(1);
    kept = at::where((above < p) | (p >= 1), kept, 0.0);
    kept = kept / kept.sum({-1}, /*keepdim=*/true);
    return {{"token_ids", at::zeros_like(probs).scatter_(1, order, kept)}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const int64_t rows = workload.axes.at("B"), vocab = workload.axes.at("V");
    const InputInit logits = init_of(*task.find_input("probs"), workload);
    const InputInit ks = init_of(*task.find_input("top_k"), workload);
    const InputInit ps = init_of(*task.find_input("top_p"), workload);
    if ((logits.dist != "normal" && logits.dist != "ties") || ks.dist != "randint" || ps.dist != "uniform")
      fail("sample/top_k_top_p: make_inputs draws probs from normal or ties logits, top_k from randint and top_p "
           "from uniform (got '{}', '{}', '{}')",
           logits.dist, ks.dist, ps.dist);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    auto probs = at::empty({rows, vocab}, at::TensorOptions().dtype(at::kFloat));
    auto top_k = at::empty({rows}, at::TensorOptions().dtype(at::kInt));
    auto top_p = at::empty({rows}, at::TensorOptions().dtype(at::kFloat));
    at::parallel_for(0, rows, 1, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        std::mt19937_64 rng(splitmix_finalize(seed + kSplitMixIncrement * static_cast<uint64_t>(r + 1)));
        draw_row(rng, logits, vocab, probs.data_ptr<float>() + r * vocab);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        // Every eighth row without top-k, by k = 0 or by k = V; every fifth without top-p (p = 1).
        int64_t k = static_cast<int64_t>(ks.low) +
                    static_cast<int64_t>(unit(rng) * static_cast<double>(static_cast<int64_t>(ks.high - ks.low)));
        if (r % 8 == 6) k = vocab;
        if (r % 8 == 7) k = 0;
        top_k.data_ptr<int32_t>()[r] = static_cast<int32_t>(k);
        const double p = r % 5 == 4 ? 1.0 : ps.low + (ps.high - ps.low) * unit(rng);
        top_p.data_ptr<float>()[r] = static_cast<float>(p >= 1 ? 1.0 : place_p(probs.data_ptr<float>() + r * vocab, vocab, k, p, unit(rng)));
      }
    });
    return TensorMap{{"probs", probs}, {"top_k", top_k}, {"top_p", top_p}};
  }

 private:
  // A language model's softmax: logits from the init (normal, or on a grid for ties) plus four to twelve
  // heavy tokens near log(V) + std^2 / 2 above the rest (on the grid too), each about as heavy as the
  // whole tail, so that a few tokens hold most of the mass and none dominates (after truncation the top
  // token holds about 0.6 on average); exact zeros where fp32 underflows.
  static void draw_row(std::mt19937_64& rng, const InputInit& init, int64_t vocab, float* out) {
    std::normal_distribution<double> normal(init.mean, init.std);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const bool grid = init.dist == "ties";
    const auto snap = [&](double x) { return grid ? std::round(x / init.quantum) * init.quantum : x; };
    std::vector<double> x(static_cast<std::size_t>(vocab));
    for (auto& v : x) v = snap(normal(rng));
    const int heavy = 4 + static_cast<int>(unit(rng) * 9);
    for (int h = 0; h < heavy; ++h) {
      const auto at = static_cast<std::size_t>(unit(rng) * static_cast<double>(vocab));
      x[at] = snap(x[at] + std::log(static_cast<double>(vocab)) + init.std * init.std / 2 + 1.5 * unit(rng) - 1.0);
    }
    const double top = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (auto& v : x) sum += (v = std::exp(v - top));
    for (int64_t i = 0; i < vocab; ++i) out[i] = static_cast<float>(x[static_cast<std::size_t>(i)] / sum);
  }

  // p near `target`, at least kMargin away from every cumulative mass of the row's renormalized top-k
  // set (so inside the span of one tie group, away from both ends); a target too near a boundary moves
  // into the nearest tie group of enough mass above it, at a place `u` of its span.
  static double place_p(const float* row, int64_t vocab, int64_t k, double target, double u) {
    std::vector<double> v(row, row + vocab);
    std::sort(v.begin(), v.end(), std::greater<>());
    const double kth = v[static_cast<std::size_t>((k <= 0 || k >= vocab ? vocab : k) - 1)];
    double total = 0;
    for (double x : v)
      if (x >= kth) total += x;
    // The tie groups: mass strictly above each (lo) and the group's own mass (span).
    std::vector<std::pair<double, double>> groups;
    double above = 0;
    for (std::size_t i = 0; i < v.size() && v[i] >= kth && v[i] > 0;) {
      std::size_t j = i;
      while (j < v.size() && v[j] == v[i]) ++j;
      const double span = v[i] * static_cast<double>(j - i) / total;
      groups.emplace_back(above, span);
      above += span;
      i = j;
    }
    std::size_t g = 0;
    while (g + 1 < groups.size() && groups[g].first + groups[g].second < target) ++g;
    const auto [lo, span] = groups[g];
    // The top group needs no margin below: nothing lies above it.
    const double low = g == 0 ? 0.0 : lo + kMargin, high = lo + span - kMargin;
    if (target > low && target < high) return target;
    while (g > 0 && groups[g].second < 4 * kMargin) --g;
    return groups[g].first + groups[g].second * (0.25 + 0.5 * u);
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::TopKTopP);
