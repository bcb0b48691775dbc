// Eager reference for attn/decode_mla, as DeepSeek-V3's inference code writes absorbed MLA attention
// (inference/model.py, attn_impl "absorb") over a paged latent cache: per sequence, its pages gathered with
// index_select on its block-table row and cut to its length; every head's query against the 576-wide rows
// (one bf16 product), fp32 softmax and LSE, p back to bf16, p times the rows' first 512 columns. The float64
// oracle is the same code; it holds one sequence's gathered rows and scores at a time (151 MB and 34 MB in
// float64 at 32768 tokens and 128 heads: no chunking needed).
//
// make_inputs draws what a serving step holds: lengths of the workload's progression in a random order, each
// sequence's pages at random places of a cache larger than the pages used, unused table entries pointing at
// random pages, every page (used or not) full of random values. The library path gathers every sequence's
// rows at once and runs torch's memory-efficient attention (the SDPA backend that takes Dk 576 != Dv 512)
// in its varlen form, which returns the LSE; on the cpu torch's flash kernel per sequence (V the whole row).
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "reference/inputs.hpp"
#include "reference/paged_cache.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr int64_t kPage = 64;    // tokens per page (FlashMLA's block size)
constexpr int64_t kWidth = 576;  // a latent row: 512 values (kv_c), then 64 rotary key columns (k_pe)
constexpr int64_t kValues = 512;

// Each sequence's context length, read on the host, checked against what its block-table row can hold.
std::vector<int64_t> lengths_of(const at::Tensor& seq_lens, int64_t table_width) {
  const at::Tensor host = seq_lens.to(at::kCPU, at::kLong).contiguous();
  std::vector<int64_t> lengths(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 1 || lengths[b] > table_width * kPage)
      fail("attn/decode_mla: seq_lens[{}] = {} (1 <= seq_len <= 64 MB = {})", b, lengths[b], table_width * kPage);
  return lengths;
}

// Sequence b's rows [L, 576]: its first ceil(L / 64) pages, in table order, cut to L.
at::Tensor gather(const at::Tensor& cache, const at::Tensor& table_row, int64_t length) {
  const int64_t pages = (length + kPage - 1) / kPage;
  const at::Tensor rows = cache.index_select(0, table_row.narrow(0, 0, pages));  // [pages, 64, 576]
  return rows.view({pages * kPage, kWidth}).narrow(0, 0, length);
}

class DecodeMla : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& cache = inputs.at("kv_cache");
    const at::Tensor table = inputs.at("block_table").to(at::kLong);
    const double scale = scalars.f("softmax_scale");
    const int64_t batch = q.size(0), heads = q.size(1);
    if (q.size(2) != kWidth || cache.size(1) != kPage || cache.size(2) != kWidth)
      fail("attn/decode_mla: q [B, H, {}] and kv_cache [NB, {}, {}] expected, got q [.., .., {}] and kv_cache [.., {}, {}]", kWidth,
           kPage, kWidth, q.size(2), cache.size(1), cache.size(2));
    const auto lengths = lengths_of(inputs.at("seq_lens"), table.size(1));
    // The softmax in fp32, or in float64 for the oracle.
    const auto wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor o = at::empty({batch, heads, kValues}, q.options());
    at::Tensor lse = at::empty({batch, heads}, q.options().dtype(wide));
    for (int64_t b = 0; b < batch; ++b) {
      const at::Tensor kv = gather(cache, table[b], lengths[b]);  // [L, 576]: K; its first 512 columns are V
      const at::Tensor values = kv.narrow(1, 0, kValues);
      const at::Tensor scores = (at::matmul(q[b], kv.t()) * scale).to(wide);  // [H, L]
      const at::Tensor row_lse = at::logsumexp(scores, -1, /*keepdim=*/true);
      const at::Tensor p = at::exp(scores - row_lse).to(q.scalar_type());
      o[b].copy_(at::matmul(p, values));
      lse[b].copy_(row_lse.view({heads}));
    }
    return {{"o", o}, {"lse", lse}};
  }

  bool has_library() const override { return true; }

  TensorMap library(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor& q = inputs.at("q");
    const at::Tensor& cache = inputs.at("kv_cache");
    const at::Tensor& table = inputs.at("block_table");
    const double scale = scalars.f("softmax_scale");
    const auto lengths = lengths_of(inputs.at("seq_lens"), table.size(1));
    const int64_t batch = q.size(0), heads = q.size(1);
    if (q.is_cuda()) {
      // Every context row's slot (page * 64 + row) in one index, then one gather: [N, 576].
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
      const at::Tensor kv = cache.view({-1, kWidth}).index_select(0, slot);  // [N, 576]
      // [1, tokens, H, D] operands; the one latent head broadcast over the H query heads (stride 0, no copy).
      const at::Tensor keys = kv.unsqueeze(1).expand({offsets.back(), heads, kWidth}).unsqueeze(0);
      const at::Tensor values = kv.narrow(1, 0, kValues).unsqueeze(1).expand({offsets.back(), heads, kValues}).unsqueeze(0);
      const at::Tensor cu_q = at::arange(batch + 1, on(at::kInt));
      const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
      auto [o, lse, seed, offset, max_q, max_k] =
          at::_efficient_attention_forward(q.unsqueeze(0), keys, values, std::nullopt, cu_q, cu, 1, longest, 0.0,
                                           /*custom_mask_type=*/0, /*compute_log_sumexp=*/true, scale);
      // o [1, B, H, 512]; lse [B, H, 32] (one query per sequence, padded to the kernel's alignment).
      return {{"o", o.squeeze(0)}, {"lse", lse.select(2, 0).contiguous()}};
    }
    // cpu: torch's flash kernel per sequence on [1, H, L, D] views (the latent head broadcast over the query
    // heads), which returns the LSE [1, H, 1]. It refuses Dk != Dv, so V is the whole 576-wide row and o the
    // output's first 512 columns (the same sums; 12% more work in p v).
    at::Tensor o = at::empty({batch, heads, kValues}, q.options());
    at::Tensor lse = at::empty({batch, heads}, q.options().dtype(at::kFloat));
    const at::Tensor rows = table.to(at::kLong);
    for (int64_t b = 0; b < batch; ++b) {
      const at::Tensor kv = gather(cache, rows[b], lengths[b]);
      const auto per_head = [&](const at::Tensor& x) { return x.unsqueeze(0).unsqueeze(0).expand({1, heads, x.size(0), x.size(1)}); };
      const auto [out, row_lse] = at::_scaled_dot_product_flash_attention_for_cpu(
          q[b].unsqueeze(0).unsqueeze(2), per_head(kv), per_head(kv), 0.0, /*is_causal=*/false, {}, scale);
      o[b].copy_(out[0].select(1, 0).narrow(1, 0, kValues));
      lse[b].copy_(row_lse[0].select(1, 0));
    }
    return {{"o", o}, {"lse", lse}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload, at::Generator& gen) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const int64_t batch = axis("B"), heads = axis("H"), blocks = axis("NB"), width = axis("MB");
    const std::vector<int64_t> progression = paged_lengths(task, workload, kPage);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const PagedTable paged = draw_paged_table(progression, blocks, width, kPage, gen);
    const auto seed = static_cast<uint64_t>(at::randint(0, int64_t{1} << 62, {1}, gen, i64).item<int64_t>());
    const auto draw = [&](const char* name, at::IntArrayRef shape, uint64_t index) {
      return draw_input(init_of(*task.find_input(name), workload), shape, seed, index, at::kFloat);
    };
    TensorMap inputs;
    inputs["q"] = draw("q", {batch, heads, kWidth}, 0);
    inputs["kv_cache"] = draw("kv_cache", {blocks, kPage, kWidth}, 1);
    inputs["block_table"] = paged.block_table;
    inputs["seq_lens"] = paged.seq_lens;
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::DecodeMla);
