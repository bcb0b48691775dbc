// Eager reference for pos/rope_neox, as vLLM's RotaryEmbedding.forward_native (forward_static) writes it:
// gather each token's cos/sin row, rotate the two halves of every head with bf16 products and sums (three
// roundings), concatenate, and copy the result back into q and k (the op is in place). With float64
// inputs (the oracle) nothing is rounded.
//
// make_inputs draws what a serving batch holds: positions of several sequences at disjoint offsets (not
// 0..T-1) and the model's real cos/sin table, built the way vLLM builds it.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/splitmix.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

// Neox rotation of x [N, H, head_size] by cos, sin [N, rotary_dim / 2]: the first rotary_dim elements of
// every head, as pairs (i, i + rotary_dim / 2); the rest passes through. vLLM's ApplyRotaryEmb.forward_static
// plus the concatenation of RotaryEmbedding.forward_static.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t rotary_dim) {
  const int64_t head_size = x.size(-1);
  const auto rot = x.narrow(-1, 0, rotary_dim);
  const auto pass = x.narrow(-1, rotary_dim, head_size - rotary_dim);
  const auto c = cos.unsqueeze(-2).to(x.scalar_type());
  const auto s = sin.unsqueeze(-2).to(x.scalar_type());
  const auto halves = rot.chunk(2, -1);
  const auto o1 = halves[0] * c - halves[1] * s;
  const auto o2 = halves[1] * c + halves[0] * s;
  return at::cat({at::cat({o1, o2}, -1), pass}, -1);
}

// vLLM's table for the model whose context is M positions: fp32 inverse frequencies (Llama-3.1's "llama3"
// scaling for its 128K context), fp32 products, fp32 cos and sin, [cos | sin] per row, cast to bf16 by the
// caller's lay-out. RotaryEmbeddingBase._compute_cos_sin_cache and Llama3RotaryEmbedding._compute_inv_freq.
at::Tensor cos_sin_table(int64_t max_positions, int64_t rotary_dim) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const double theta = 500000.0;
  at::Tensor inv_freq = 1.0 / at::pow(theta, at::arange(0, rotary_dim, 2, f32) / static_cast<double>(rotary_dim));
  if (max_positions == 131072) {
    const double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original = 8192.0;
    const double low_freq_wavelen = original / low_freq_factor, high_freq_wavelen = original / high_freq_factor;
    const auto wave_len = 2.0 * std::numbers::pi / inv_freq;
    const auto smooth = (original / wave_len - low_freq_factor) / (high_freq_factor - low_freq_factor);
    inv_freq = at::where(wave_len < high_freq_wavelen, inv_freq,
                         at::where(wave_len > low_freq_wavelen, inv_freq / factor,
                                   (1.0 - smooth) * inv_freq / factor + smooth * inv_freq));
  } else if (max_positions != 8192) {
    fail("pos/rope_neox: no model's table has {} positions (8192: Llama-3, 131072: Llama-3.1)", max_positions);
  }
  const auto freqs = at::outer(at::arange(max_positions, f32), inv_freq);
  return at::cat({freqs.cos(), freqs.sin()}, -1);
}

// Positions of a batch of `sequences` runs, `tokens` in all, at disjoint ranges of [0, max_positions). When
// there are more tokens than sequences, about half the sequences are prefill chunks that share the extra
// tokens at random and the others are single decode tokens. The ranges lie in a random order with random
// gaps; the batch lists the sequences in another random order, each run's tokens in increasing position.
at::Tensor batch_positions(int64_t tokens, int64_t sequences, int64_t max_positions, at::Generator& generator) {
  if (sequences < 1 || sequences > tokens || tokens > max_positions)
    fail("pos/rope_neox: {} sequences of {} tokens in {} positions", sequences, tokens, max_positions);
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
  // The free positions split into sequences + 1 gaps by sorted cut points; the j-th range in position
  // order starts after the lengths before it and the j-th cut point.
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

// Values of one distribution in fixed chunks, each chunk from its own generator seeded from `seed`: drawn
// in parallel (the largest workloads draw 67 M values), the same values on any number of threads.
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
        fail("pos/rope_neox: make_inputs draws normal or whole-df student_t values, not '{}'", init.dist);
      }
      values.narrow(0, c * kChunk, length).copy_(chunk);
    }
  });
  return values.view(shape);
}

class RopeNeox : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor positions = inputs.at("positions").flatten();
    at::Tensor& q = inputs.at("q");
    at::Tensor& k = inputs.at("k");
    const at::Tensor& cache = inputs.at("cos_sin_cache");
    const int64_t rotary_dim = cache.size(1);
    const auto cos_sin = cache.index_select(0, positions);
    const auto halves = cos_sin.chunk(2, -1);
    q.copy_(rotate(q, halves[0], halves[1], rotary_dim));
    k.copy_(rotate(k, halves[0], halves[1], rotary_dim));
    return {};
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload,
                                       at::Generator& generator) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const auto seeds = at::randint(0, int64_t{1} << 62, {2}, generator, at::TensorOptions().dtype(at::kLong));
    TensorMap inputs;
    inputs["positions"] = batch_positions(axis("T"), axis("S"), axis("M"), generator);
    inputs["q"] = draw(init_of(*task.find_input("q"), workload), {axis("T"), axis("Hq"), axis("D")},
                       static_cast<uint64_t>(seeds[0].item<int64_t>()));
    inputs["k"] = draw(init_of(*task.find_input("k"), workload), {axis("T"), axis("Hkv"), axis("D")},
                       static_cast<uint64_t>(seeds[1].item<int64_t>()));
    inputs["cos_sin_cache"] = cos_sin_table(axis("M"), axis("D"));
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::RopeNeox);
