// Eager reference for attn/decode_paged_gqa, as a model author writes decode over a paged cache: per
// sequence, its pages gathered from each cache with index_select on its block-table row, cut to its length,
// q grouped by KV head against that head's k and v (broadcast, no copy), scores in the inputs' dtype, fp32
// softmax and LSE, p back to the inputs' dtype, p v. The float64 oracle is the same code: it holds one
// sequence's gathered K and V at a time (268 MB each at 32768 tokens), never the whole cache twice.
//
// make_inputs draws what a serving step holds: lengths of the workload's progression in a random order, each
// sequence's pages at random places of a cache larger than the pages used, unused table entries pointing at
// random pages, every page (used or not) full of random values. The library path gathers every sequence's
// K and V rows at once and runs torch's FlashAttention-2 varlen forward; on the cpu torch's flash kernel.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "reference/inputs.hpp"
#include "reference/paged_cache.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr int64_t kPage = 16;  // tokens per page (vLLM's default block_size)

// Each sequence's context length, read on the host, checked against what its block-table row can hold.
std::vector<int64_t> lengths_of(const at::Tensor& seq_lens, int64_t table_width) {
  const at::Tensor host = seq_lens.to(at::kCPU, at::kLong).contiguous();
  std::vector<int64_t> lengths(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 1 || lengths[b] > table_width * kPage)
      fail("attn/decode_paged_gqa: seq_lens[{}] = {} (1 <= seq_len <= 16 MB = {})", b, lengths[b], table_width * kPage);
  return lengths;
}

// Sequence b's K or V rows [L, Hkv, D]: its first ceil(L / 16) pages, in table order, cut to L.
at::Tensor gather(const at::Tensor& cache, const at::Tensor& table_row, int64_t length) {
  const int64_t pages = (length + kPage - 1) / kPage;
  const at::Tensor rows = cache.index_select(0, table_row.narrow(0, 0, pages));  // [pages, 16, Hkv, D]
  return rows.view({pages * kPage, cache.size(2), cache.size(3)}).narrow(0, 0, length);
}

class DecodePagedGqa : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& k_cache = inputs.at("k_cache");
    const at::Tensor& v_cache = inputs.at("v_cache");
    const at::Tensor table = inputs.at("block_table").to(at::kLong);
    const double scale = scalars.f("softmax_scale");
    const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(2), kv_heads = k_cache.size(2);
    const int64_t group = heads / kv_heads;
    const auto lengths = lengths_of(inputs.at("seq_lens"), table.size(1));
    // The softmax in fp32, or in float64 for the oracle.
    const auto wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor o = at::empty_like(q);
    at::Tensor lse = at::empty({heads, batch}, q.options().dtype(wide));
    for (int64_t b = 0; b < batch; ++b) {
      const at::Tensor k = gather(k_cache, table[b], lengths[b]);  // [L, Hkv, D]
      const at::Tensor v = gather(v_cache, table[b], lengths[b]);
      // [Hkv, G, D] queries against [Hkv, D, L] keys: query head h = g G + r is KV head g's.
      const at::Tensor qs = q[b].view({kv_heads, group, dim});
      const at::Tensor scores = (at::matmul(qs, k.permute({1, 2, 0})) * scale).to(wide);  // [Hkv, G, L]
      const at::Tensor row_lse = at::logsumexp(scores, -1, /*keepdim=*/true);
      const at::Tensor p = at::exp(scores - row_lse).to(q.scalar_type());
      o[b].copy_(at::matmul(p, v.permute({1, 0, 2})).view({heads, dim}));  // [Hkv, G, L] x [Hkv, L, D]
      lse.select(1, b).copy_(row_lse.view({heads}));
    }
    return {{"o", o}, {"lse", lse}};
  }

  bool has_library() const override { return true; }

  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& k_cache = inputs.at("k_cache");
    const at::Tensor& v_cache = inputs.at("v_cache");
    const at::Tensor& table = inputs.at("block_table");
    const double scale = scalars.f("softmax_scale");
    const auto lengths = lengths_of(inputs.at("seq_lens"), table.size(1));
    const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k_cache.size(2), dim = q.size(2);
    if (q.is_cuda()) {
      // Every context row's slot (page * 16 + row) in one index, then one gather per cache: [N, Hkv, D].
      std::vector<int64_t> offsets = {0};
      for (const int64_t length : lengths) offsets.push_back(offsets.back() + length);
      const auto on = [&](at::ScalarType type) { return at::TensorOptions().dtype(type).device(q.device()); };
      const at::Tensor cu = at::tensor(std::vector<int32_t>(offsets.begin(), offsets.end()), at::TensorOptions().dtype(at::kInt)).to(q.device());
      const at::Tensor token = at::arange(offsets.back(), on(at::kLong));
      const at::Tensor sequence = at::repeat_interleave(at::tensor(lengths, at::TensorOptions().dtype(at::kLong)).to(q.device()));
      const at::Tensor position = token - cu.to(at::kLong).index_select(0, sequence);
      const at::Tensor entry = sequence * table.size(1) + at::floor_divide(position, kPage);
      const at::Tensor page = table.to(at::kLong).contiguous().view(-1).index_select(0, entry);
      const at::Tensor slot = page * kPage + at::remainder(position, kPage);
      const at::Tensor k = k_cache.view({-1, kv_heads, dim}).index_select(0, slot);
      const at::Tensor v = v_cache.view({-1, kv_heads, dim}).index_select(0, slot);
      const at::Tensor cu_q = at::arange(batch + 1, on(at::kInt));
      const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
      auto [o, lse, seed, offset, mask] = at::_flash_attention_forward(q, k, v, cu_q, cu, 1, longest, 0.0, /*is_causal=*/false,
                                                                       /*return_debug_mask=*/false, scale);
      return {{"o", o}, {"lse", lse}};
    }
    // cpu: torch's flash kernel per sequence on [1, H, L, D] views (K and V repeated per group), which
    // returns the LSE [1, Hq, 1].
    at::Tensor o = at::empty_like(q);
    at::Tensor lse = at::empty({heads, batch}, q.options().dtype(at::kFloat));
    const at::Tensor rows = table.to(at::kLong);
    const int64_t group = heads / kv_heads;
    for (int64_t b = 0; b < batch; ++b) {
      const auto per_head = [&](const at::Tensor& x) { return x.transpose(0, 1).unsqueeze(0).repeat_interleave(group, 1); };
      const auto [out, row_lse] = at::_scaled_dot_product_flash_attention_for_cpu(
          q[b].unsqueeze(0).unsqueeze(0).transpose(1, 2), per_head(gather(k_cache, rows[b], lengths[b])),
          per_head(gather(v_cache, rows[b], lengths[b])), 0.0, /*is_causal=*/false, {}, scale);
      o[b].copy_(out[0].select(1, 0));
      lse.select(1, b).copy_(row_lse[0].select(1, 0));
    }
    return {{"o", o}, {"lse", lse}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const int64_t batch = axis("B"), heads = axis("Hq"), kv_heads = axis("Hkv"), dim = axis("D");
    const int64_t blocks = axis("NB"), width = axis("MB");
    if (heads % kv_heads != 0) fail("attn/decode_paged_gqa: workload '{}': Hq = {} is not a multiple of Hkv = {}", workload.name, heads, kv_heads);
    const std::vector<int64_t> progression = paged_lengths(task, workload, kPage);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const PagedTable paged = draw_paged_table(progression, blocks, width, kPage, gen);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    const auto draw = [&](const char* name, at::IntArrayRef shape, uint64_t index) {
      return draw_input(init_of(*task.find_input(name), workload), shape, seed, index, at::kFloat);
    };
    TensorMap inputs;
    inputs["q"] = draw("q", {batch, heads, dim}, 0);
    inputs["k_cache"] = draw("k_cache", {blocks, kPage, kv_heads, dim}, 1);
    inputs["v_cache"] = draw("v_cache", {blocks, kPage, kv_heads, dim}, 2);
    inputs["block_table"] = paged.block_table;
    inputs["seq_lens"] = paged.seq_lens;
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::DecodePagedGqa);
