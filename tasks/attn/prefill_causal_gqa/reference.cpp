// Eager reference for attn/prefill_causal_gqa, as a model author writes attention for a packed batch: per
// sequence, q grouped by KV head against that head's k and v (broadcast, no copy), scores in the inputs'
// dtype, causal mask, fp32 softmax and LSE, p back to the inputs' dtype, p v. Chunked over queries so that
// no score matrix exceeds kScoreElements: the float64 oracle (the same code on float64 inputs) then needs a
// few GiB at most on the evaluation device.
//
// make_inputs draws cu_seqlens from the workload's lengths (an arithmetic progression, in a random order)
// and q, k, v with reference/inputs.hpp's generators. The library path is cuDNN's attention per sequence
// on cuda and torch's flash kernel per sequence on the cpu.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include "reference/inputs.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

// The largest score matrix one chunk builds: 2^28 elements (0.5 GiB in bf16, 2 GiB in float64).
constexpr int64_t kScoreElements = int64_t{1} << 28;

// One sequence of a packed [T, H, D] tensor as the [1, H, L, D] view torch's attention kernels take.
at::Tensor per_head(const at::Tensor& x, int64_t start, int64_t length) {
  return x.narrow(0, start, length).transpose(0, 1).unsqueeze(0);
}

// Each sequence's [start, end) in the packed tokens, read on the host.
std::vector<std::pair<int64_t, int64_t>> sequences_of(const at::Tensor& cu_seqlens) {
  const at::Tensor offsets = cu_seqlens.to(at::kCPU, at::kLong).contiguous();
  const int64_t* offset = offsets.data_ptr<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t b = 0; b + 1 < offsets.numel(); ++b) {
    if (offset[b + 1] <= offset[b])
      fail("attn/prefill_causal_gqa: cu_seqlens[{}] = {} is not above cu_seqlens[{}] = {}", b + 1, offset[b + 1], b, offset[b]);
    spans.emplace_back(offset[b], offset[b + 1]);
  }
  return spans;
}

// The workload's lengths: B values from Lmin to Lmax, each Lmin + floor(b (Lmax - Lmin) / (B - 1)).
std::vector<int64_t> lengths_of(const Workload& workload) {
  const auto axis = [&](const char* name) { return workload.axes.at(name); };
  const int64_t count = axis("B"), shortest = axis("Lmin"), longest = axis("Lmax");
  if (shortest < 1 || longest < shortest || (count == 1 && longest != shortest))
    fail("attn/prefill_causal_gqa: workload '{}': Lmin = {}, Lmax = {} with B = {} (1 <= Lmin <= Lmax, equal when B = 1)",
         workload.name, shortest, longest, count);
  std::vector<int64_t> lengths(count, shortest);
  for (int64_t b = 1; b < count; ++b) lengths[b] = shortest + b * (longest - shortest) / (count - 1);
  int64_t tokens = 0, pairs = 0;
  for (const int64_t length : lengths) tokens += length, pairs += length * (length + 1) / 2;
  if (tokens != axis("T")) fail("attn/prefill_causal_gqa: workload '{}': T = {}, its lengths sum to {}", workload.name, axis("T"), tokens);
  if (pairs != axis("P")) fail("attn/prefill_causal_gqa: workload '{}': P = {}, its lengths give {} visible pairs", workload.name, axis("P"), pairs);
  return lengths;
}

class PrefillCausalGqa : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& k = inputs.at("k");
    const at::Tensor& v = inputs.at("v");
    const double scale = scalars.f("softmax_scale");
    const int64_t tokens = q.size(0), heads = q.size(1), kv_heads = k.size(1), dim = q.size(2);
    const int64_t group = heads / kv_heads;
    // The softmax in fp32, or in float64 for the oracle.
    const auto wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor o = at::empty_like(q);
    at::Tensor lse = at::empty({heads, tokens}, q.options().dtype(wide));
    for (const auto& [start, end] : sequences_of(inputs.at("cu_seqlens"))) {
      const int64_t length = end - start;
      // [Hkv, G, L, D] queries against [Hkv, 1, L, D] keys and values: query head h = g G + r is KV head g's.
      const at::Tensor qs = q.narrow(0, start, length).view({length, kv_heads, group, dim}).permute({1, 2, 0, 3});
      const at::Tensor ks = k.narrow(0, start, length).permute({1, 0, 2}).unsqueeze(1);
      const at::Tensor vs = v.narrow(0, start, length).permute({1, 0, 2}).unsqueeze(1);
      const int64_t rows = std::clamp<int64_t>(kScoreElements / (heads * length), 1, length);
      for (int64_t first = 0; first < length; first += rows) {
        const int64_t count = std::min(rows, length - first), keys = first + count;
        // Keys after the chunk's last query are masked for every query of it: leave them out.
        at::Tensor scores = at::matmul(qs.narrow(2, first, count), ks.narrow(2, 0, keys).transpose(-1, -2)) * scale;
        const at::Tensor future = at::ones({count, keys}, q.options().dtype(at::kBool)).triu(first + 1);
        scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity()).to(wide);
        const at::Tensor row_lse = at::logsumexp(scores, -1, /*keepdim=*/true);
        const at::Tensor p = at::exp(scores - row_lse).to(q.scalar_type());
        const at::Tensor out = at::matmul(p, vs.narrow(2, 0, keys));  // [Hkv, G, count, D]
        o.narrow(0, start + first, count).copy_(out.permute({2, 0, 1, 3}).reshape({count, heads, dim}));
        lse.narrow(1, start + first, count).copy_(row_lse.view({heads, count}));
      }
    }
    return {{"o", o}, {"lse", lse}};
  }

  bool has_library() const override { return true; }

  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& k = inputs.at("k");
    const at::Tensor& v = inputs.at("v");
    const at::Tensor& cu_seqlens = inputs.at("cu_seqlens");
    const double scale = scalars.f("softmax_scale");
    const auto spans = sequences_of(cu_seqlens);
    // Per sequence on [1, H, L, D] views: on cuda cuDNN's attention, K and V with their own Hkv heads (cuDNN
    // takes grouped heads as they are), the LSE asked for: torch's fastest path for these shapes (what SDPA
    // picks with enable_gqa, which returns no LSE; docs/results/2026-12-02-h200-memory-bound-v2.md). On the
    // cpu torch's flash kernel, K and V repeated to Hq heads. Both give the LSE as [1, Hq, L] (or [1, Hq, L, 1]).
    const int64_t tokens = q.size(0), heads = q.size(1), group = heads / k.size(1);
    at::Tensor o = at::empty_like(q);
    at::Tensor lse = at::empty({heads, tokens}, q.options().dtype(at::kFloat));
    for (const auto& [start, end] : spans) {
      const int64_t length = end - start;
      at::Tensor out, row_lse;
      if (q.is_cuda()) {
        const auto result = at::_scaled_dot_product_cudnn_attention(per_head(q, start, length), per_head(k, start, length),
                                                                    per_head(v, start, length), {},
                                                                    /*compute_log_sumexp=*/true, 0.0, /*is_causal=*/true,
                                                                    /*return_debug_mask=*/false, scale);
        out = std::get<0>(result), row_lse = std::get<1>(result);
      } else {
        std::tie(out, row_lse) = at::_scaled_dot_product_flash_attention_for_cpu(
            per_head(q, start, length), per_head(k, start, length).repeat_interleave(group, 1),
            per_head(v, start, length).repeat_interleave(group, 1), 0.0, /*is_causal=*/true, {}, scale);
      }
      o.narrow(0, start, length).copy_(out[0].transpose(0, 1));
      lse.narrow(1, start, length).copy_(row_lse.reshape({heads, length}));
    }
    return {{"o", o}, {"lse", lse}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const int64_t tokens = axis("T"), heads = axis("Hq"), kv_heads = axis("Hkv"), dim = axis("D");
    if (heads % kv_heads != 0) fail("attn/prefill_causal_gqa: workload '{}': Hq = {} is not a multiple of Hkv = {}", workload.name, heads, kv_heads);
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

D2K_REGISTER_TASK(d2k::PrefillCausalGqa);
