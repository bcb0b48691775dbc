// Eager reference for attn/qk_norm_rope, as vLLM's Qwen3 attention writes it with the native ops: split the
// packed qkv row, RMSNorm every head of q and k (fp32 variance, the normalized value rounded to bf16, then
// times the weight, rounded), RotaryEmbedding.forward_native on the results (bf16 products and sums), and
// copy q and k back into qkv (the fused op is in place). v is not touched. With float64 inputs (the
// oracle) nothing is rounded.
//
// make_inputs draws what a serving batch holds: positions of several sequences at disjoint offsets (not
// 0..T-1) and Qwen3's cos/sin table, built the way vLLM builds it.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>

#include "core/splitmix.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

// vLLM's RMSNorm.forward_native over the last dimension: x.float(), variance, x * rsqrt(var + eps) rounded
// to the input's dtype, times the weight in that dtype.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto h = x.to(acc);
  const auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  return (h * at::rsqrt(variance + eps)).to(x.scalar_type()) * weight;
}

// vLLM's RotaryEmbedding.forward_static (neox): x [T, heads, D] by the rows' cos and sin over the first
// rotary_dim elements of each head (here all of them), each product and sum in x's dtype, then the
// concatenation with the pass-through part.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t rotary_dim = 2 * cos.size(-1);
  const auto rot = x.narrow(-1, 0, rotary_dim);
  const auto pass = x.narrow(-1, rotary_dim, x.size(-1) - rotary_dim);
  const auto c = cos.unsqueeze(-2).to(x.scalar_type());
  const auto s = sin.unsqueeze(-2).to(x.scalar_type());
  const auto halves = rot.chunk(2, -1);
  return at::cat({at::cat({halves[0] * c - halves[1] * s, halves[1] * c + halves[0] * s}, -1), pass}, -1);
}

// Qwen3's table: theta 1e6 over 40960 positions, fp32 inverse frequencies, products, cos and sin, as
// RotaryEmbeddingBase._compute_cos_sin_cache builds it ([cos | sin] per row; the lay-out casts to bf16).
at::Tensor cos_sin_table(int64_t max_positions, int64_t rotary_dim) {
  if (max_positions != 40960)
    fail("attn/qk_norm_rope: no Qwen3 table has {} positions (Qwen3's is 40960)", max_positions);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor inv_freq = 1.0 / at::pow(1000000.0, at::arange(0, rotary_dim, 2, f32) / static_cast<double>(rotary_dim));
  const auto freqs = at::outer(at::arange(max_positions, f32), inv_freq);
  return at::cat({freqs.cos(), freqs.sin()}, -1);
}

// Positions of a batch of `sequences` runs, `tokens` in all, at disjoint ranges of [0, max_positions), as in
// pos/rope_neox: about half the sequences are prefill chunks sharing the extra tokens, the others single
// decode tokens; the ranges lie in a random order with random gaps, the batch lists the sequences in
// another random order.
at::Tensor batch_positions(int64_t tokens, int64_t sequences, int64_t max_positions, at::Generator& generator) {
  if (sequences < 1 || sequences > tokens || tokens > max_positions)
    fail("attn/qk_norm_rope: {} sequences of {} tokens in {} positions", sequences, tokens, max_positions);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  std::vector<int64_t> length(sequences, 1);
  const int64_t extra = tokens - sequences;
  if (extra > 0) {
    const int64_t chunks = std::max<int64_t>(1, sequences / 2);
    const auto chosen = at::randperm(sequences, generator, i64);
    const auto cuts = std::get<0>(at::randint(0, extra + 1, {chunks - 1}, generator, i64).sort());
    int64_t previous = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t cut = c + 1 < chunks ? cuts[c].item<int64_t>() : extra;
      length[chosen[c].item<int64_t>()] += cut - previous;
      previous = cut;
    }
  }
  const auto place = at::randperm(sequences, generator, i64);
  const auto gaps = std::get<0>(at::randint(0, max_positions - tokens + 1, {sequences}, generator, i64).sort());
  std::vector<int64_t> start(sequences);
  int64_t before = 0;
  for (int64_t j = 0; j < sequences; ++j) {
    const int64_t s = place[j].item<int64_t>();
    start[s] = before + gaps[j].item<int64_t>();
    before += length[s];
  }
  auto positions = at::empty({tokens}, i64);
  auto* out = positions.data_ptr<int64_t>();
  for (int64_t s = 0, t = 0; s < sequences; ++s)
    for (int64_t i = 0; i < length[s]; ++i) out[t++] = start[s] + i;
  return positions;
}

// Values of one distribution in fixed chunks, each chunk from its own generator seeded from `seed`: drawn in
// parallel, the same values on any number of threads.
at::Tensor draw(const InputInit& init, at::IntArrayRef shape, uint64_t seed) {
  constexpr int64_t kChunk = 1 << 20;
  const int64_t n = c10::multiply_integers(shape);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  auto values = at::empty({n}, f32);
  at::parallel_for(0, (n + kChunk - 1) / kChunk, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(splitmix_finalize(seed + kSplitMixIncrement * (c + 1)));
      const int64_t length = std::min(kChunk, n - c * kChunk);
      at::Tensor chunk;
      if (init.dist == "normal") {
        chunk = at::normal(init.mean, init.std, {length}, gen, f32);
      } else if (init.dist == "student_t" && init.df == std::floor(init.df) && init.df >= 1 && init.df <= 8) {
        // t = z / sqrt(chi2(df) / df), chi2 a sum of df squared normals.
        const auto z = at::normal(0.0, 1.0, {length}, gen, f32);
        auto chi2 = at::zeros({length}, f32);
        for (int k = 0; k < static_cast<int>(init.df); ++k) chi2 += at::normal(0.0, 1.0, {length}, gen, f32).square();
        chunk = init.mean + init.std * z / at::sqrt(chi2 / init.df);
      } else {
        fail("attn/qk_norm_rope: make_inputs draws normal or whole-df student_t values, not '{}'", init.dist);
      }
      values.narrow(0, c * kChunk, length).copy_(chunk);
    }
  });
  return values.view(shape);
}

struct Heads {
  int64_t q, kv, size;
};

Heads heads_of(const at::Tensor& qkv, const at::Tensor& weight, const Scalars& scalars) {
  const Heads heads{scalars.i("num_heads_q"), scalars.i("num_heads_kv"), weight.size(0)};
  if ((heads.q + 2 * heads.kv) * heads.size != qkv.size(-1))
    fail("attn/qk_norm_rope: qkv rows of {} values for {} + 2 x {} heads of {}", qkv.size(-1), heads.q, heads.kv, heads.size);
  return heads;
}

class QkNormRope : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    at::Tensor& qkv = inputs.at("qkv");
    const at::Tensor& q_weight = inputs.at("q_weight");
    const at::Tensor& k_weight = inputs.at("k_weight");
    const at::Tensor positions = inputs.at("positions").flatten();
    const at::Tensor& cache = inputs.at("cos_sin_cache");
    const double eps = scalars.f("eps");
    const Heads heads = heads_of(qkv, q_weight, scalars);
    const int64_t tokens = qkv.size(0);

    const auto parts = qkv.split_with_sizes({heads.q * heads.size, heads.kv * heads.size, heads.kv * heads.size}, -1);
    const auto q = rms_norm(parts[0].view({tokens, heads.q, heads.size}), q_weight, eps);
    const auto k = rms_norm(parts[1].view({tokens, heads.kv, heads.size}), k_weight, eps);
    const auto cos_sin = cache.index_select(0, positions).chunk(2, -1);
    parts[0].copy_(rotate(q, cos_sin[0], cos_sin[1]).view({tokens, heads.q * heads.size}));
    parts[1].copy_(rotate(k, cos_sin[0], cos_sin[1]).view({tokens, heads.kv * heads.size}));
    return {};
  }

  // q, k and v of the packed rows on their own: q and k as numbers, v bit for bit.
  TensorMap comparable(const TensorMap& outputs, const Scalars& scalars) const override {
    const at::Tensor& qkv = outputs.at("qkv");
    const int64_t q = scalars.i("num_heads_q"), kv = scalars.i("num_heads_kv");
    const int64_t size = qkv.size(-1) / (q + 2 * kv);
    const auto parts = qkv.split_with_sizes({q * size, kv * size, kv * size}, -1);
    return {{"q", parts[0]}, {"k", parts[1]}, {"v", parts[2]}};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload,
                                       at::Generator& generator) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const auto seeds = at::randint(0, int64_t{1} << 62, {3}, generator, at::TensorOptions().dtype(at::kLong));
    const auto seed = [&](int i) { return static_cast<uint64_t>(seeds[i].item<int64_t>()); };
    const int64_t width = (axis("Hq") + 2 * axis("Hkv")) * axis("D");
    TensorMap inputs;
    inputs["qkv"] = draw(init_of(*task.find_input("qkv"), workload), {axis("T"), width}, seed(0));
    inputs["q_weight"] = draw(init_of(*task.find_input("q_weight"), workload), {axis("D")}, seed(1));
    inputs["k_weight"] = draw(init_of(*task.find_input("k_weight"), workload), {axis("D")}, seed(2));
    inputs["positions"] = batch_positions(axis("T"), axis("S"), axis("M"), generator);
    inputs["cos_sin_cache"] = cos_sin_table(axis("M"), axis("D"));
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::QkNormRope);
