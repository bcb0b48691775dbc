// Eager reference for attn/prefill_sliding_window, as a model author writes sliding-window attention for a
// packed batch: per sequence, q grouped by KV head against that head's k and v (broadcast, no copy), scores
// in the inputs' dtype, the band mask, fp32 softmax and LSE, p back to the inputs' dtype, p v. Chunked over
// queries so that no score matrix exceeds kScoreElements, and each chunk multiplies only the keys its
// queries can see, [first - W, last]: a 16384-token sequence with W 4095 never builds a 16384^2 matrix. The
// float64 oracle is the same code on float64 inputs.
//
// make_inputs draws cu_seqlens from the workload's lengths (an arithmetic progression, in a random order)
// and q, k, v with reference/inputs.hpp's generators. The library path is SDPA's memory-efficient kernel
// with the band as an attention mask on cuda, torch's flash kernel with the mask on the cpu.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr const char* kTask = "attn/prefill_sliding_window";
// The largest score matrix one chunk builds: 2^28 elements (0.5 GiB in bf16, 2 GiB in float64).
constexpr int64_t kScoreElements = int64_t{1} << 28;

// Each sequence's [start, end) in the packed tokens, read on the host.
std::vector<std::pair<int64_t, int64_t>> sequences_of(const at::Tensor& cu_seqlens) {
  const at::Tensor offsets = cu_seqlens.to(at::kCPU, at::kLong).contiguous();
  const int64_t* offset = offsets.data_ptr<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t b = 0; b + 1 < offsets.numel(); ++b) {
    if (offset[b + 1] <= offset[b])
      fail("{}: cu_seqlens[{}] = {} is not above cu_seqlens[{}] = {}", kTask, b + 1, offset[b + 1], b, offset[b]);
    spans.emplace_back(offset[b], offset[b + 1]);
  }
  return spans;
}

// The window W from the scalar, which must agree with the axis the FLOP count uses.
int64_t window_of(const Scalars& scalars) {
  const int64_t window = scalars.i("window_left");
  if (window < 0) fail("{}: window_left = {} (W >= 0)", kTask, window);
  if (scalars.axes.count("W") && scalars.axes.at("W") != window)
    fail("{}: the scalar window_left = {} differs from the axis W = {}", kTask, window, scalars.axes.at("W"));
  return window;
}

// Visible pairs of a sequence of `length` tokens: the first m = min(L, W + 1) queries see 1 .. m keys, the
// others W + 1 each.
int64_t band_pairs(int64_t length, int64_t window) {
  const int64_t m = std::min(length, window + 1);
  return m * (m + 1) / 2 + (length - m) * (window + 1);
}

// The workload's lengths: B values from Lmin to Lmax, each Lmin + floor(b (Lmax - Lmin) / (B - 1)).
std::vector<int64_t> lengths_of(const Workload& workload) {
  const auto axis = [&](const char* name) { return workload.axes.at(name); };
  const int64_t count = axis("B"), shortest = axis("Lmin"), longest = axis("Lmax"), window = axis("W");
  if (shortest < 1 || longest < shortest || (count == 1 && longest != shortest))
    fail("{}: workload '{}': Lmin = {}, Lmax = {} with B = {} (1 <= Lmin <= Lmax, equal when B = 1)", kTask, workload.name,
         shortest, longest, count);
  std::vector<int64_t> lengths(count, shortest);
  for (int64_t b = 1; b < count; ++b) lengths[b] = shortest + b * (longest - shortest) / (count - 1);
  int64_t tokens = 0, pairs = 0;
  for (const int64_t length : lengths) tokens += length, pairs += band_pairs(length, window);
  if (tokens != axis("T")) fail("{}: workload '{}': T = {}, its lengths sum to {}", kTask, workload.name, axis("T"), tokens);
  if (pairs != axis("P"))
    fail("{}: workload '{}': P = {}, its lengths and W = {} give {} visible pairs", kTask, workload.name, axis("P"), window, pairs);
  return lengths;
}

// The rows of a query chunk: as many as keep heads x rows x (the keys they see) within kScoreElements.
int64_t chunk_rows(int64_t heads, int64_t length, int64_t window) {
  int64_t rows = length;
  while (rows > 1 && heads * rows * std::min(length, rows + window) > kScoreElements) rows = (rows + 1) / 2;
  return rows;
}

// [Hkv, G, L, D] queries and [Hkv, 1, L, D] keys or values of one sequence: query head h = g G + r is KV
// head g's.
at::Tensor grouped(const at::Tensor& x, int64_t start, int64_t length, int64_t kv_heads) {
  return x.narrow(0, start, length).view({length, kv_heads, -1, x.size(2)}).permute({1, 2, 0, 3});
}

// The band as a [queries, keys] bool tensor, true where hidden: key j (from first_key) is hidden from query
// i (from first_query) when j > i or j < i - W.
at::Tensor hidden_of(int64_t first_query, int64_t queries, int64_t first_key, int64_t keys, int64_t window,
                     const at::TensorOptions& device) {
  const auto i64 = device.dtype(at::kLong);
  const at::Tensor query = at::arange(first_query, first_query + queries, i64).unsqueeze(1);
  const at::Tensor key = at::arange(first_key, first_key + keys, i64).unsqueeze(0);
  return (key > query).logical_or(key < query - window);
}

class PrefillSlidingWindow : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& k = inputs.at("k");
    const at::Tensor& v = inputs.at("v");
    const double scale = scalars.f("softmax_scale");
    const int64_t window = window_of(scalars);
    const int64_t tokens = q.size(0), heads = q.size(1), kv_heads = k.size(1), dim = q.size(2);
    // The softmax in fp32, or in float64 for the oracle.
    const auto wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor o = at::empty_like(q);
    at::Tensor lse = at::empty({heads, tokens}, q.options().dtype(wide));
    for (const auto& [start, end] : sequences_of(inputs.at("cu_seqlens"))) {
      const int64_t length = end - start;
      const at::Tensor qs = grouped(q, start, length, kv_heads);
      const at::Tensor ks = grouped(k, start, length, kv_heads), vs = grouped(v, start, length, kv_heads);
      const int64_t rows = chunk_rows(heads, length, window);
      for (int64_t first = 0; first < length; first += rows) {
        const int64_t count = std::min(rows, length - first);
        // Keys before first - W are hidden from every query of the chunk, keys after its last query too:
        // leave them out.
        const int64_t first_key = std::max<int64_t>(0, first - window), keys = first + count - first_key;
        at::Tensor scores = at::matmul(qs.narrow(2, first, count), ks.narrow(2, first_key, keys).transpose(-1, -2)) * scale;
        const at::Tensor hidden = hidden_of(first, count, first_key, keys, window, q.options());
        scores = scores.masked_fill(hidden, -std::numeric_limits<double>::infinity()).to(wide);
        const at::Tensor row_lse = at::logsumexp(scores, -1, /*keepdim=*/true);
        const at::Tensor p = at::exp(scores - row_lse).to(q.scalar_type());
        const at::Tensor out = at::matmul(p, vs.narrow(2, first_key, keys));  // [Hkv, G, count, D]
        o.narrow(0, start + first, count).copy_(out.permute({2, 0, 1, 3}).reshape({count, heads, dim}));
        lse.narrow(1, start + first, count).copy_(row_lse.view({heads, count}));
      }
    }
    return {{"o", o}, {"lse", lse}};
  }

  bool has_library() const override { return true; }

  // Per sequence, the band as a mask: the fused kernels that accept one (FlashAttention's does not). On
  // cuda SDPA's memory-efficient kernel, the one that returns the LSE with a mask (its additive bias rows
  // padded to 16 elements, as SDPA pads them; K and V repeated, since it takes equal head counts); on the
  // cpu torch's flash kernel, which takes the same bias.
  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& k = inputs.at("k");
    const at::Tensor& v = inputs.at("v");
    const double scale = scalars.f("softmax_scale");
    const int64_t window = window_of(scalars);
    const int64_t tokens = q.size(0), heads = q.size(1), group = heads / k.size(1);
    at::Tensor o = at::empty_like(q);
    at::Tensor lse = at::empty({heads, tokens}, q.options().dtype(at::kFloat));
    for (const auto& [start, end] : sequences_of(inputs.at("cu_seqlens"))) {
      const int64_t length = end - start;
      const auto per_head = [&](const at::Tensor& x) { return x.narrow(0, start, length).transpose(0, 1).unsqueeze(0); };
      const at::Tensor qh = per_head(q), kh = per_head(k).repeat_interleave(group, 1), vh = per_head(v).repeat_interleave(group, 1);
      // The band as an additive bias in the inputs' dtype (0 or -inf), the form both kernels take.
      const int64_t padded = (length + 15) / 16 * 16;
      const at::Tensor bias = at::zeros({length, padded}, q.options()).narrow(1, 0, length);
      bias.masked_fill_(hidden_of(0, length, 0, length, window, q.options()), -std::numeric_limits<double>::infinity());
      at::Tensor out, row_lse;
      if (q.is_cuda()) {
        std::tie(out, row_lse, std::ignore, std::ignore) = at::_scaled_dot_product_efficient_attention(
            qh, kh, vh, bias.unsqueeze(0).unsqueeze(0).expand({1, heads, length, length}), /*compute_log_sumexp=*/true, 0.0,
            /*is_causal=*/false, scale);
        row_lse = row_lse.narrow(-1, 0, length);  // padded to a multiple of 32 queries
      } else {
        std::tie(out, row_lse) = at::_scaled_dot_product_flash_attention_for_cpu(qh, kh, vh, 0.0, /*is_causal=*/false,
                                                                                  bias.unsqueeze(0).unsqueeze(0), scale);
      }
      o.narrow(0, start, length).copy_(out[0].transpose(0, 1));
      lse.narrow(1, start, length).copy_(row_lse[0]);
    }
    return {{"o", o}, {"lse", lse}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const int64_t tokens = axis("T"), heads = axis("Hq"), kv_heads = axis("Hkv"), dim = axis("D");
    if (heads % kv_heads != 0) fail("{}: workload '{}': Hq = {} is not a multiple of Hkv = {}", kTask, workload.name, heads, kv_heads);
    const std::vector<int64_t> lengths = lengths_of(workload);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const at::Tensor order = at::randperm(static_cast<int64_t>(lengths.size()), gen, i64);
    std::vector<int32_t> offsets = {0};
    for (int64_t b = 0; b < order.numel(); ++b) offsets.push_back(offsets.back() + static_cast<int32_t>(lengths[order[b].item<int64_t>()]));
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    TensorMap inputs;
    inputs["cu_seqlens"] = at::tensor(offsets, at::TensorOptions().dtype(at::kInt));
    const auto draw = [&](const char* name, int64_t h, uint64_t index) {
      return draw_input(init_of(*task.find_input(name), workload), {tokens, h, dim}, seed, index, at::kFloat);
    };
    inputs["q"] = draw("q", heads, 0);
    inputs["k"] = draw("k", kv_heads, 1);
    inputs["v"] = draw("v", kv_heads, 2);
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::PrefillSlidingWindow);
