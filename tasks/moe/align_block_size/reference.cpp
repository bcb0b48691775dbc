// moe/align_block_size: vLLM's moe_align_block_size as eager PyTorch writes it without a custom op, and
// the routing ids a router gives (make_inputs).
#include <cmath>

#include "reference/task_code.hpp"

namespace {

class AlignBlockSize final : public d2k::TaskCode {
 public:
  d2k::TensorMap reference(d2k::TensorMap& inputs, const d2k::Scalars& scalars) const override {
    const at::Tensor& topk_ids = inputs.at("topk_ids");
    const int64_t E = scalars.i("num_experts"), B = scalars.i("block_size");
    if (E != scalars.axis("E") || B != scalars.axis("B"))
      d2k::fail("moe/align_block_size: scalars num_experts {} and block_size {} must equal the axes E {} and B {}", E, B,
                scalars.axis("E"), scalars.axis("B"));
    const int64_t N = topk_ids.numel(), capacity = N + E * (B - 1), blocks = (capacity + B - 1) / B;
    const auto longs = topk_ids.options().dtype(at::kLong);

    const auto flat = topk_ids.reshape(-1).to(at::kLong);
    const auto counts = at::bincount(flat, {}, E);
    const auto padded = at::floor_divide(counts + (B - 1), B) * B;
    const auto ends = padded.cumsum(0);
    const auto starts = ends - padded;
    // A stable sort by expert puts each expert's entries in flat-index order; an entry's rank inside its
    // expert is its place in the sorted order less the number of entries of the experts before it.
    const auto [experts, order] = at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false);
    const auto before = counts.cumsum(0) - counts;
    const auto rank = at::arange(N, longs) - before.index_select(0, experts);
    auto sorted_token_ids = at::full({capacity}, N, topk_ids.options().dtype(at::kInt));
    sorted_token_ids.index_put_({starts.index_select(0, experts) + rank}, order.to(at::kInt));

    const auto total = ends.narrow(0, E - 1, 1);
    const auto block_starts = at::arange(blocks, longs) * B;
    const auto owner = at::searchsorted(ends, block_starts, /*out_int32=*/false, /*right=*/true);
    const auto expert_ids = at::where(block_starts < total, owner, at::zeros_like(owner)).to(at::kInt);
    return {{"sorted_token_ids", sorted_token_ids},
            {"expert_ids", expert_ids},
            {"num_tokens_post_pad", total.to(at::kInt)}};
  }

  // Each token's k distinct experts, drawn without replacement with probabilities proportional to
  // per-expert popularities exp(z), z ~ N(0, 1) (a Gumbel top-k), among the experts [low, high) of the
  // input's randint init: loads as skewed as a trained router's, or concentrated on a few experts.
  std::optional<d2k::TensorMap> make_inputs(const d2k::Task& task, const d2k::Workload& workload,
                                            at::Generator& generator) const override {
    const auto& spec = *task.find_input("topk_ids");
    const auto init = d2k::init_of(spec, workload);
    const int64_t T = workload.axes.at("T"), k = workload.axes.at("k"), E = workload.axes.at("E");
    const auto low = static_cast<int64_t>(init.low), high = static_cast<int64_t>(init.high);
    if (init.dist != "randint" || low < 0 || high > E || high - low < k)
      d2k::fail("moe/align_block_size: workload '{}': topk_ids needs a randint init whose [low, high) holds at least "
                "k = {} experts of E = {} (got {} [{}, {}))",
                workload.name, k, E, init.dist, low, high);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const auto popularity = at::normal(0.0, 1.0, {high - low}, generator, f64);
    const auto u = at::empty({T, high - low}, f64).uniform_(1e-300, 1.0, generator);
    const auto keys = popularity.unsqueeze(0) - at::log(-at::log(u));
    const auto chosen = std::get<1>(keys.topk(k, /*dim=*/-1));
    return d2k::TensorMap{{"topk_ids", (chosen + low).to(at::kInt).contiguous()}};
  }
};

}  // namespace

D2K_REGISTER_TASK(AlignBlockSize);
