// Eager reference for kv/rope_cache_write, as a model author writes vLLM's two steps in PyTorch: the neox
// rotation of RotaryEmbedding.forward_native (bf16 products and sums, three roundings, copied back into q and
// k), then reshape_and_cache_flash: the valid tokens' k and v rows converted to the cache's bytes and put at
// their slots. With float64 inputs (the oracle) the rotation is exact and the cache write rounds it the way
// an fp32 kernel does (fp32, then bf16; fp8 from that bf16 value by an fp32 division), so that the cache,
// compared exactly, holds the bits the task defines.
//
// make_inputs draws what a serving step holds: positions of several sequences at disjoint offsets,
// padding tokens at the end with slot -1, each sequence's blocks scattered over the cache, the model's
// real cos/sin table, caches full of other sequences' (random, non-zero) history.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/splitmix.hpp"
#include "reference/task_code.hpp"

namespace d2k {
namespace {

constexpr double kFp8Max = 448.0;  // largest finite e4m3fn value: the saturation bound

// Neox rotation of x [N, H, D] by cos and sin [N, D / 2] in x's dtype (vLLM's forward_native with
// ApplyRotaryEmb.forward_static): each product and the sum rounded in bf16, nothing rounded in float64.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto c = cos.unsqueeze(-2).to(x.scalar_type());
  const auto s = sin.unsqueeze(-2).to(x.scalar_type());
  const auto halves = x.chunk(2, -1);
  return at::cat({halves[0] * c - halves[1] * s, halves[1] * c + halves[0] * s}, -1);
}

// The bytes a cache element holds for the values x [N, H, D] (the k output, or v): E = 2, x rounded to bf16
// (through fp32, as an fp32 kernel rounds; a no-op on bf16 values); E = 1, that bf16 value divided by the
// scale in fp32, saturated and rounded to fp8 e4m3fn (vLLM's scaled_convert). [N, H, D * E] uint8.
at::Tensor cache_bytes(const at::Tensor& x, const at::Tensor& scale, int64_t bytes_per_element) {
  const auto rounded = x.to(at::kFloat).to(at::kBFloat16).contiguous();
  if (bytes_per_element == 2) return rounded.view(at::kByte);
  // The clamp is the saturation: torch's float -> e4m3fn cast turns values from 464 up into NaN.
  const auto scaled = rounded.to(at::kFloat) / scale.to(at::kFloat);
  return scaled.clamp(-kFp8Max, kFp8Max).to(at::kFloat8_e4m3fn).contiguous().view(at::kByte);
}

int64_t element_bytes(const Scalars& scalars) {
  const int64_t e = scalars.axis("E");
  if (e != 1 && e != 2) fail("kv/rope_cache_write: E = {} (1: an fp8 e4m3 cache, 2: a bf16 cache)", e);
  return e;
}

// vLLM's table for the model whose context is M positions (RotaryEmbeddingBase._compute_cos_sin_cache with
// Llama3RotaryEmbedding._compute_inv_freq for Llama-3.1's 128K context): fp32 throughout, [cos | sin].
at::Tensor cos_sin_table(int64_t positions, int64_t rotary_dim) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor inv_freq = 1.0 / at::pow(500000.0, at::arange(0, rotary_dim, 2, f32) / static_cast<double>(rotary_dim));
  if (positions == 131072) {
    const double factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
    const auto wavelength = 2.0 * std::numbers::pi / inv_freq;
    const auto smooth = (original / wavelength - low) / (high - low);
    inv_freq = at::where(wavelength < original / high, inv_freq,
                         at::where(wavelength > original / low, inv_freq / factor,
                                   (1.0 - smooth) * inv_freq / factor + smooth * inv_freq));
  } else if (positions != 8192) {
    fail("kv/rope_cache_write: no model's table has {} positions (8192: Llama-3, 131072: Llama-3.1)", positions);
  }
  const auto angles = at::outer(at::arange(positions, f32), inv_freq);
  return at::cat({angles.cos(), angles.sin()}, -1);
}

// One sequence's tokens in the batch: positions [start, start + length).
struct Run {
  int64_t start = 0, length = 1;
};

// S runs of `tokens` tokens in all, at disjoint ranges of [0, positions), in a random batch order. With
// more tokens than sequences, about half the sequences are prefill chunks that share the extra tokens at
// random and the rest single decode tokens; the ranges lie in another random order with random gaps.
std::vector<Run> draw_runs(int64_t tokens, int64_t sequences, int64_t positions, at::Generator& gen) {
  if (sequences < 1 || sequences > tokens || tokens > positions)
    fail("kv/rope_cache_write: {} sequences of {} tokens in {} positions", sequences, tokens, positions);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  std::vector<Run> runs(sequences);
  if (const int64_t extra = tokens - sequences; extra > 0) {
    const int64_t chunks = std::max<int64_t>(1, sequences / 2);
    const auto who = at::randperm(sequences, gen, i64);
    const auto cuts = std::get<0>(at::randint(0, extra + 1, {chunks - 1}, gen, i64).sort());
    for (int64_t c = 0, before = 0; c < chunks; ++c) {
      const int64_t cut = c + 1 < chunks ? cuts[c].item<int64_t>() : extra;
      runs[who[c].item<int64_t>()].length += cut - before;
      before = cut;
    }
  }
  // The free positions split into gaps by sorted cut points; the j-th range in position order starts
  // after the lengths of the ranges before it and the j-th cut.
  const auto order = at::randperm(sequences, gen, i64);
  const auto gaps = std::get<0>(at::randint(0, positions - tokens + 1, {sequences}, gen, i64).sort());
  for (int64_t j = 0, used = 0; j < sequences; ++j) {
    Run& run = runs[order[j].item<int64_t>()];
    run.start = used + gaps[j].item<int64_t>();
    used += run.length;
  }
  return runs;
}

// Values of a normal or whole-df Student-t distribution, in fixed chunks each from its own generator: the
// largest inputs hold 33 M values, drawn in parallel, the same on any number of threads.
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
        const auto z = at::normal(0.0, 1.0, {length}, gen, f32);
        auto chi2 = at::zeros({length}, f32);
        for (int k = 0; k < static_cast<int>(init.df); ++k) chi2 += at::normal(0.0, 1.0, {length}, gen, f32).square();
        chunk = init.mean + init.std * z / at::sqrt(chi2 / init.df);
      } else {
        fail("kv/rope_cache_write: make_inputs draws normal or whole-df student_t values, not '{}'", init.dist);
      }
      values.narrow(0, c * kChunk, length).copy_(chunk);
    }
  });
  return values.view(shape);
}

// A cache full of other tokens' history: magnitudes 2^u with u uniform in [-6, 8) (fp8's normal range,
// below its saturation) and random signs, as bf16 or fp8 bytes: non-zero, finite and varied, so that any
// write to a slot the batch does not address changes its bytes. [blocks, block_size, heads, D * E] uint8.
at::Tensor draw_cache(at::IntArrayRef shape, int64_t bytes_per_element, uint64_t seed) {
  constexpr int64_t kChunk = 1 << 20;
  const int64_t bytes = c10::multiply_integers(shape), n = bytes / bytes_per_element;
  auto cache = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::parallel_for(0, (n + kChunk - 1) / kChunk, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(splitmix_finalize(~seed + kSplitMixIncrement * (c + 1)));
      const int64_t length = std::min(kChunk, n - c * kChunk);
      const auto magnitude = at::exp2(at::empty({length}, f32).uniform_(-6.0, 8.0, gen));
      const auto sign = at::empty({length}, f32).bernoulli_(0.5, gen) * 2.0 - 1.0;
      const auto values = magnitude * sign;
      const auto coded = bytes_per_element == 2 ? values.to(at::kBFloat16).view(at::kByte)
                                                : values.to(at::kFloat8_e4m3fn).view(at::kByte);
      cache.narrow(0, c * kChunk * bytes_per_element, length * bytes_per_element).copy_(coded);
    }
  });
  return cache.view(shape);
}

// A per-tensor scale, drawn from the input's init: uniform, or randint (vLLM's default 1.0).
at::Tensor draw_scale(const InputInit& init, at::Generator& gen) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  if (init.dist == "uniform") return at::empty({1}, f32).uniform_(init.low, init.high, gen);
  if (init.dist == "randint")
    return at::randint(static_cast<int64_t>(init.low), static_cast<int64_t>(init.high), {1}, gen, f32);
  fail("kv/rope_cache_write: a scale is drawn uniform or randint, not '{}'", init.dist);
}

class RopeCacheWrite : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars& scalars) const override {
    const at::Tensor positions = inputs.at("positions").flatten();
    at::Tensor& q = inputs.at("q");
    at::Tensor& k = inputs.at("k");
    const at::Tensor& v = inputs.at("v");
    const at::Tensor& table = inputs.at("cos_sin_cache");
    const at::Tensor slot_mapping = inputs.at("slot_mapping").flatten();
    at::Tensor& key_cache = inputs.at("key_cache");
    at::Tensor& value_cache = inputs.at("value_cache");
    const int64_t bytes_per_element = element_bytes(scalars);

    // rotary_embedding, in place.
    const auto rows = table.index_select(0, positions).chunk(2, -1);
    q.copy_(rotate(q, rows[0], rows[1]));
    k.copy_(rotate(k, rows[0], rows[1]));

    // reshape_and_cache_flash: padding tokens (slot -1) write nothing.
    const auto valid = at::nonzero(slot_mapping >= 0).flatten();
    const auto slots = slot_mapping.index_select(0, valid);
    const int64_t heads = k.size(1), row_bytes = k.size(2) * bytes_per_element;
    key_cache.view({-1, heads, row_bytes})
        .index_put_({slots}, cache_bytes(k.index_select(0, valid), inputs.at("k_scale"), bytes_per_element));
    value_cache.view({-1, heads, row_bytes})
        .index_put_({slots}, cache_bytes(v.index_select(0, valid), inputs.at("v_scale"), bytes_per_element));
    return {};
  }

  // The caches as the values their bytes hold (bf16 or fp8 e4m3fn), compared exactly; q and k as they are.
  TensorMap comparable(const TensorMap& outputs, const Scalars& scalars) const override {
    const auto as = element_bytes(scalars) == 2 ? at::kBFloat16 : at::kFloat8_e4m3fn;
    TensorMap view = outputs;
    for (const char* name : {"key_cache", "value_cache"}) view[name] = outputs.at(name).view(as);
    return view;
  }

  std::optional<TensorMap> make_inputs(const Task& task, const Workload& workload,
                                       at::Generator& gen) const override {
    const auto axis = [&](const char* name) { return workload.axes.at(name); };
    const int64_t tokens = axis("T"), valid = axis("N"), heads = axis("Hkv"), head_size = axis("D");
    const int64_t blocks = axis("NB"), block_size = axis("BS"), bytes_per_element = axis("E");
    if (valid > tokens) fail("kv/rope_cache_write: {} valid tokens of {}", valid, tokens);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    const auto seeds = at::randint(0, int64_t{1} << 62, {5}, gen, i64);
    const auto seed = [&](int i) { return static_cast<uint64_t>(seeds[i].item<int64_t>()); };

    // Positions and slots of the sequences, then the padding tokens' (stale positions, slot -1).
    const auto runs = draw_runs(valid, axis("S"), axis("M"), gen);
    int64_t needed = 0;
    for (const Run& run : runs) needed += (run.start + run.length - 1) / block_size - run.start / block_size + 1;
    if (needed > blocks) fail("kv/rope_cache_write: the batch needs {} blocks, the cache has {}", needed, blocks);
    const auto free_blocks = at::randperm(blocks, gen, i64);
    auto positions = at::randint(0, axis("M"), {tokens}, gen, i64);
    auto slot_mapping = at::full({tokens}, -1, i64);
    auto* pos = positions.data_ptr<int64_t>();
    auto* slot = slot_mapping.data_ptr<int64_t>();
    const auto* block_of = free_blocks.data_ptr<int64_t>();
    int64_t t = 0, next_block = 0;
    for (const Run& run : runs) {
      // The sequence's block for each logical block its new tokens fall in, taken from the free ones.
      const int64_t first_logical = run.start / block_size;
      const int64_t base = next_block;
      next_block += (run.start + run.length - 1) / block_size - first_logical + 1;
      for (int64_t p = run.start; p < run.start + run.length; ++p, ++t) {
        pos[t] = p;
        slot[t] = block_of[base + p / block_size - first_logical] * block_size + p % block_size;
      }
    }

    const auto projection = [&](const char* name, int64_t h, int i) {
      return draw(init_of(*task.find_input(name), workload), {tokens, h, head_size}, seed(i));
    };
    const std::vector<int64_t> cache_shape = {blocks, block_size, heads, head_size * bytes_per_element};
    TensorMap inputs;
    inputs["positions"] = positions;
    inputs["q"] = projection("q", axis("Hq"), 0);
    inputs["k"] = projection("k", heads, 1);
    inputs["v"] = projection("v", heads, 2);
    inputs["cos_sin_cache"] = cos_sin_table(axis("M"), head_size);
    inputs["slot_mapping"] = slot_mapping;
    inputs["key_cache"] = draw_cache(cache_shape, bytes_per_element, seed(3));
    inputs["value_cache"] = draw_cache(cache_shape, bytes_per_element, seed(4));
    inputs["k_scale"] = draw_scale(init_of(*task.find_input("k_scale"), workload), gen);
    inputs["v_scale"] = draw_scale(init_of(*task.find_input("v_scale"), workload), gen);
    return inputs;
  }
};

}  // namespace
}  // namespace d2k

D2K_REGISTER_TASK(d2k::RopeCacheWrite);
