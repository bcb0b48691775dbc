// kv/rope_cache_write against its originals: the reference rotates q and k by the table row at each token's
// position (vLLM's rotary_embedding) and writes the rotated k and v into the cache rows their slots name,
// skipping slot -1 (vLLM's reshape_and_cache_flash); an fp8 cache holds the bf16 k divided by k_scale in fp32,
// saturated and rounded to nearest even (vLLM's scaled_convert). make_inputs gives sequences in their own
// scattered blocks with padding at the end. The tolerance accepts an fp32 kernel's bits and rejects a
// skipped slot written anyway, k cached before its rotation, another fp8 rounding order or a reciprocal.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numbers>
#include <set>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";
const auto kF32 = at::TensorOptions().dtype(at::kFloat);
const auto kI64 = at::TensorOptions().dtype(at::kLong);

// How a candidate turns its k (and v) into fp8 codes.
enum class Fp8Rule {
  division,       // the task's: bf16 k widened, / scale in fp32, saturated, nearest even
  reciprocal,     // bf16 k * (1 / scale) in fp32
  from_fp32,      // the fp32 rotation / scale, without the bf16 rounding (FlashInfer's and aiter's order)
  float64,        // bf16 k / scale in float64, then to fp8
  no_saturation,  // torch's cast without the clamp: NaN from 464 up
};

// A candidate computed outside the reference: q and k rotated in fp32 and rounded once (what a kernel does),
// the caches written by the rule and mistakes chosen.
struct Candidate {
  Fp8Rule rule = Fp8Rule::division;
  bool padding_written = false;        // slot -1 used as an index: torch writes the last slot
  bool cached_before_rotation = false;  // k stored into the cache as it came in
  bool three_roundings = false;         // q and k as the eager code rounds them (bf16 products and sum)
};

struct RopeCacheWrite : ::testing::Test {
  Task task = load_task(kTasks, std::string("kv/rope_cache_write"));
  std::unique_ptr<TaskCode> code = make_task_code("kv/rope_cache_write");

  Workload workload(const std::string& name, std::map<std::string, int64_t> axes) const {
    Workload w = *task.find_workload(name);
    for (const auto& [axis, value] : axes) w.axes[axis] = value;
    w.layouts.clear();
    return w;
  }
  static Scalars scalars_of(const Workload& w) {
    Scalars scalars;
    scalars.axes = w.axes;
    return scalars;
  }
  // The reference's outputs for these inputs (copies; the inputs stay as they are), natively or in float64.
  TensorMap run(const TensorMap& inputs, const Scalars& scalars, bool wide) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs)
      copy[name] = wide && at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor.clone();
    code->reference(copy, scalars);
    return {{"q", copy.at("q")}, {"k", copy.at("k")}, {"key_cache", copy.at("key_cache")},
            {"value_cache", copy.at("value_cache")}};
  }

  static at::Tensor fp8_bytes(const at::Tensor& values, Fp8Rule rule, const at::Tensor& scale) {
    at::Tensor scaled;
    switch (rule) {
      case Fp8Rule::reciprocal: scaled = values.to(at::kFloat) * (1.0 / scale.to(at::kFloat)); break;
      case Fp8Rule::float64: scaled = values.to(at::kDouble) / scale.to(at::kDouble); break;
      default: scaled = values.to(at::kFloat) / scale.to(at::kFloat); break;
    }
    if (rule != Fp8Rule::no_saturation) scaled = scaled.clamp(-448.0, 448.0);
    return scaled.to(at::kFloat8_e4m3fn).contiguous().view(at::kByte);
  }

  TensorMap candidate(const TensorMap& inputs, const Scalars& scalars, const Candidate& how) const {
    if (how.three_roundings) return run(inputs, scalars, false);
    const at::Tensor& table = inputs.at("cos_sin_cache");
    const int64_t half = table.size(1) / 2, bytes = scalars.axis("E");
    const auto rows = table.index_select(0, inputs.at("positions")).to(at::kFloat);
    const auto c = rows.narrow(1, 0, half).unsqueeze(1), s = rows.narrow(1, half, half).unsqueeze(1);
    const auto rotate32 = [&](const at::Tensor& x) {
      const auto xf = x.to(at::kFloat);
      const auto a = xf.narrow(-1, 0, half), b = xf.narrow(-1, half, half);
      return at::cat({a * c - b * s, b * c + a * s}, -1);
    };
    const at::Tensor k32 = rotate32(inputs.at("k"));
    TensorMap out{{"q", rotate32(inputs.at("q")).to(at::kBFloat16)}, {"k", k32.to(at::kBFloat16)}};
    const at::Tensor slots = inputs.at("slot_mapping");
    // The valid tokens, then (the mistake) the padding ones with their slot -1 as an index, in a second
    // index_put_: within one, the order of two writes to the same slot (a valid token may own the last
    // slot) is unspecified, and the mistake would show in one cache or the other, or in neither.
    std::vector<at::Tensor> passes = {at::nonzero(slots >= 0).flatten()};
    if (how.padding_written) passes.push_back(at::nonzero(slots < 0).flatten());
    const auto write = [&](const char* name, const at::Tensor& values, const at::Tensor& values32, const char* scale) {
      at::Tensor cache = inputs.at(name).clone();
      for (const auto& tokens : passes) {
        const auto rows_of = values.index_select(0, tokens);
        at::Tensor coded;
        if (bytes == 2) {
          coded = rows_of.contiguous().view(at::kByte);
        } else if (how.rule == Fp8Rule::from_fp32) {
          coded = fp8_bytes(values32.index_select(0, tokens), Fp8Rule::division, inputs.at(scale));
        } else {
          coded = fp8_bytes(rows_of, how.rule, inputs.at(scale));
        }
        cache.view({-1, values.size(1), values.size(2) * bytes}).index_put_({slots.index_select(0, tokens)}, coded);
      }
      out[name] = cache;
    };
    const at::Tensor cached_k = how.cached_before_rotation ? inputs.at("k") : out.at("k");
    write("key_cache", cached_k, how.cached_before_rotation ? inputs.at("k").to(at::kFloat) : k32, "k_scale");
    write("value_cache", inputs.at("v"), inputs.at("v").to(at::kFloat), "v_scale");
    return out;
  }
};

at::Tensor bf16(std::initializer_list<float> values, std::vector<int64_t> shape) {
  return at::tensor(std::vector<float>(values), kF32).view(shape).to(at::kBFloat16);
}

// The bytes of one cache slot, [Hkv, D * E].
at::Tensor slot_of(const at::Tensor& cache, int64_t slot) {
  return cache.view({-1, cache.size(2), cache.size(3)})[slot];
}

TEST_F(RopeCacheWrite, TheReferenceRotatesAllTokensAndCachesOnlyTheirSlots) {
  // A table of 3 rows for a head of 4 (pairs (0, 2) and (1, 3)): the identity, a quarter turn, cos 0.5
  // and sin 0.75 (every product and sum exact in bf16). Tokens at positions 2, 0, 1 with slots 5, -1, 2
  // in a bf16 cache of 2 blocks of 4 slots.
  const at::Tensor table = bf16({1, 1, 0, 0, 0, 0, 1, 1, 0.5, 0.5, 0.75, 0.75}, {3, 4});
  const at::Tensor x = at::tensor({2.0f, -1.0f, 4.0f, 0.5f}, kF32).view({1, 1, 4}).repeat({3, 1, 1});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor old_keys = at::normal(0.0, 1.0, {2, 4, 1, 4}, gen, kF32).to(at::kBFloat16).view(at::kByte);
  const at::Tensor old_values = at::normal(0.0, 1.0, {2, 4, 1, 4}, gen, kF32).to(at::kBFloat16).view(at::kByte);
  TensorMap inputs{{"positions", at::tensor({int64_t{2}, int64_t{0}, int64_t{1}}, kI64)},
                   {"q", x.to(at::kBFloat16)},
                   {"k", (-x).to(at::kBFloat16)},
                   {"v", bf16({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 1, 4})},
                   {"cos_sin_cache", table},
                   {"slot_mapping", at::tensor({int64_t{5}, int64_t{-1}, int64_t{2}}, kI64)},
                   {"key_cache", old_keys.clone()},
                   {"value_cache", old_values.clone()},
                   {"k_scale", at::ones({1}, kF32)},
                   {"v_scale", at::ones({1}, kF32)}};
  Scalars scalars;
  scalars.axes["E"] = 2;
  const auto out = run(inputs, scalars, false);
  const at::Tensor q = out.at("q").to(at::kFloat);
  // Position 2: (2, 4) -> (2 * 0.5 - 4 * 0.75, 4 * 0.5 + 2 * 0.75) = (-2, 3.5); (-1, 0.5) -> (-0.875, -0.5).
  EXPECT_TRUE(at::equal(q[0][0], at::tensor({-2.0f, -0.875f, 3.5f, -0.5f}, kF32))) << q[0][0];
  // The padding token (slot -1) is rotated too: position 0, the identity.
  EXPECT_TRUE(at::equal(q[1][0], at::tensor({2.0f, -1.0f, 4.0f, 0.5f}, kF32))) << q[1][0];
  // Position 1: a quarter turn of the halves, (x, y) -> (-y, x).
  EXPECT_TRUE(at::equal(q[2][0], at::tensor({-4.0f, -0.5f, 2.0f, -1.0f}, kF32))) << q[2][0];
  EXPECT_TRUE(at::equal(out.at("k").to(at::kFloat), -q)) << "k is rotated by the same rows";
  // Slot 5 (block 1, offset 1) holds token 0's rotated k and its v, slot 2 token 2's, bit for bit.
  const at::Tensor k_bytes = out.at("k").contiguous().view(at::kByte), v_bytes = inputs.at("v").contiguous().view(at::kByte);
  EXPECT_TRUE(at::equal(slot_of(out.at("key_cache"), 5), k_bytes[0]));
  EXPECT_TRUE(at::equal(slot_of(out.at("key_cache"), 2), k_bytes[2]));
  EXPECT_TRUE(at::equal(slot_of(out.at("value_cache"), 5), v_bytes[0]));
  EXPECT_TRUE(at::equal(slot_of(out.at("value_cache"), 2), v_bytes[2]));
  // Every other slot keeps its bytes: the padding token wrote nowhere (not slot 7, where torch's -1 lands).
  for (const int64_t untouched : {0, 1, 3, 4, 6, 7}) {
    EXPECT_TRUE(at::equal(slot_of(out.at("key_cache"), untouched), slot_of(old_keys, untouched))) << untouched;
    EXPECT_TRUE(at::equal(slot_of(out.at("value_cache"), untouched), slot_of(old_values, untouched))) << untouched;
  }
}

TEST_F(RopeCacheWrite, AnFp8CacheHoldsTheBf16KeyOverTheScaleRoundedToNearestEvenAndSaturated) {
  // One token at a row with cos 1 and sin 2^-6, one head of 8 (pairs (i, i + 4)); scale 1 except where said.
  const float s = 0.015625f;
  const at::Tensor table = bf16({1, 1, 1, 1, s, s, s, s}, {1, 8});
  // Pair 0: x = 1.0625, y = -2^-6: x c - y s = 1.0625 + 2^-12 in fp32, which rounds to 1.0625 in bf16, an
  // fp8 midpoint (between 1 and 1.125): ties to even give 1.0 (0x38); rounding the fp32 value directly
  // would give 1.125 (0x39). y c + x s = -2^-6 + 1.0625 * 2^-6 = 2^-10: half the smallest subnormal, a tie
  // that goes to +0. Pair 1: x = 1.1875 (a midpoint between 1.125 and 1.25: to 1.25, 0x3a), y = 0.
  // Pair 2: x = 500 (saturates to 448, 0x7e), y = -600 (-448, 0xfe). Pair 3: x = 3 * 2^-10 (a subnormal
  // midpoint between 2^-9 and 2^-8: to 2^-8, 0x02), y = 0. The y of pairs 1 to 3 pick up x s.
  const at::Tensor k = bf16({1.0625f, 1.1875f, 500, 0.0029296875f, -s, 0, -600, 0}, {1, 1, 8});
  TensorMap inputs{{"positions", at::zeros({1}, kI64)},
                   {"q", k.clone()},
                   {"k", k.clone()},
                   {"v", bf16({3.375f, -0.1f, 1, 2, 3, 4, 5, 6}, {1, 1, 8})},
                   {"cos_sin_cache", table},
                   {"slot_mapping", at::tensor({int64_t{3}}, kI64)},
                   {"key_cache", at::full({1, 4, 1, 8}, 0x33, at::TensorOptions().dtype(at::kByte))},
                   {"value_cache", at::full({1, 4, 1, 8}, 0x33, at::TensorOptions().dtype(at::kByte))},
                   {"k_scale", at::ones({1}, kF32)},
                   {"v_scale", at::full({1}, 3.0f, kF32)}};
  Scalars scalars;
  scalars.axes["E"] = 1;
  const auto wide = run(inputs, scalars, true);
  const at::Tensor key = slot_of(wide.at("key_cache"), 3)[0];
  EXPECT_EQ(key[0].item<uint8_t>(), 0x38) << "1.0625 + 2^-12 rounds to bf16 1.0625 first, then ties to even";
  EXPECT_EQ(key[1].item<uint8_t>(), 0x3a) << "1.1875 ties to 1.25";
  EXPECT_EQ(key[2].item<uint8_t>(), 0x7e) << "500 saturates to 448";
  EXPECT_EQ(key[3].item<uint8_t>(), 0x02) << "3 * 2^-10 ties to 2^-8";
  EXPECT_EQ(key[4].item<uint8_t>(), 0x00) << "2^-10 ties to +0";
  EXPECT_EQ(key[6].item<uint8_t>(), 0xfe) << "-600 + 500 * 2^-6 saturates to -448";
  // The oracle (float64 inputs) and the native reference agree on every code here.
  EXPECT_TRUE(at::equal(wide.at("key_cache"), run(inputs, scalars, false).at("key_cache")));
  // v over 3: 3.375 / 3 = 1.125 exactly (0x39); -0.1 in bf16 (-0.10009765625) / 3 = -0.0333659 is 8.54
  // steps of 2^-8 in the binade [2^-5, 2^-4): 9 steps, -1.125 * 2^-5 (0x91). Other slots keep 0x33.
  const at::Tensor value = slot_of(wide.at("value_cache"), 3)[0];
  EXPECT_EQ(value[0].item<uint8_t>(), 0x39);
  EXPECT_EQ(value[1].item<uint8_t>(), 0x91);
  for (const int64_t other : {0, 1, 2})
    EXPECT_TRUE(at::equal(slot_of(wide.at("value_cache"), other), at::full({1, 8}, 0x33, at::TensorOptions().dtype(at::kByte))));
}

TEST_F(RopeCacheWrite, TheTableIsVllmsForLlama3AndLlama31) {
  for (const int64_t positions : {int64_t{8192}, int64_t{131072}}) {
    const Workload w = workload("llama3-8b-T37-padded", {{"M", positions}});
    const at::Tensor table = make_inputs(task, *code, w, 1).at("cos_sin_cache").to(at::kDouble);
    ASSERT_EQ(table.sizes(), (std::vector<int64_t>{positions, 128}));
    for (const int64_t i : {0, 10, 40, 63}) {
      double f = std::pow(500000.0, -static_cast<double>(i) / 64.0);
      const double wavelength = 2.0 * std::numbers::pi / f;
      if (positions == 131072 && wavelength > 8192.0) f /= 8.0;
      if (positions == 131072 && wavelength >= 2048.0 && wavelength <= 8192.0) {
        const double smooth = (8192.0 / wavelength - 1.0) / 3.0;
        f = (1.0 - smooth) * f / 8.0 + smooth * f;
      }
      for (const int64_t p : {int64_t{0}, int64_t{777}, positions - 1}) {
        const double slack = 0.5 * std::ldexp(1.0, -24) * 2.0 * p * f + std::ldexp(1.0, -8);
        EXPECT_NEAR(table[p][i].item<double>(), std::cos(p * f), slack) << positions << " " << p << " " << i;
        EXPECT_NEAR(table[p][64 + i].item<double>(), std::sin(p * f), slack) << positions << " " << p << " " << i;
      }
    }
  }
}

TEST_F(RopeCacheWrite, BatchesAreSequencesInTheirOwnScatteredBlocksWithPaddingAtTheEnd) {
  struct Shape {
    int64_t tokens, sequences, valid, blocks, block_size;
  };
  for (const Shape& shape : {Shape{37, 5, 33, 64, 16}, Shape{256, 250, 250, 4096, 16}, Shape{4096, 32, 4096, 4096, 16},
                             Shape{3333, 37, 3322, 2048, 32}, Shape{19, 4, 17, 32, 16}}) {
    const Workload w = workload("llama3-8b-T37-padded", {{"T", shape.tokens}, {"S", shape.sequences}, {"N", shape.valid},
                                                           {"NB", shape.blocks}, {"BS", shape.block_size}, {"Hq", 1}, {"Hkv", 1}});
    const TensorMap inputs = make_inputs(task, *code, w, 11);
    const at::Tensor positions = inputs.at("positions"), slots = inputs.at("slot_mapping");
    EXPECT_TRUE(at::equal(slots, make_inputs(task, *code, w, 11).at("slot_mapping"))) << "deterministic in the seed";
    EXPECT_FALSE(at::equal(slots, make_inputs(task, *code, w, 12).at("slot_mapping"))) << "another seed";
    const int64_t valid = shape.valid;
    std::set<int64_t> distinct_positions, distinct_slots;
    std::map<int64_t, int64_t> run_of_block;  // block -> the first position of the run that wrote it
    int64_t runs = 0, run_start = -1;
    for (int64_t t = 0; t < shape.tokens; ++t) {
      const int64_t p = positions[t].item<int64_t>(), slot = slots[t].item<int64_t>();
      ASSERT_GE(p, 0);
      ASSERT_LT(p, 8192);
      if (t >= valid) {
        EXPECT_EQ(slot, -1) << "padding at the end of the batch";
        continue;
      }
      ASSERT_GE(slot, 0) << t;
      ASSERT_LT(slot, shape.blocks * shape.block_size);
      EXPECT_EQ(slot % shape.block_size, p % shape.block_size) << "the offset in the block is the position's";
      distinct_positions.insert(p);
      distinct_slots.insert(slot);
      if (t == 0 || p != positions[t - 1].item<int64_t>() + 1) ++runs, run_start = p;
      // A block belongs to one run: consecutive positions of a run share it, no other run uses it.
      const auto [it, inserted] = run_of_block.emplace(slot / shape.block_size, run_start);
      if (!inserted) EXPECT_EQ(it->second, run_start) << "block " << it->first << " shared by two runs";
    }
    EXPECT_EQ(static_cast<int64_t>(distinct_positions.size()), valid) << "distinct positions";
    EXPECT_EQ(static_cast<int64_t>(distinct_slots.size()), valid) << "distinct slots";
    EXPECT_LE(runs, shape.sequences);
    if (shape.sequences > 2) EXPECT_GE(runs, shape.sequences / 2);
    // Scattered: the blocks are not the first ones in order.
    const int64_t top = run_of_block.rbegin()->first;
    EXPECT_GT(top, static_cast<int64_t>(run_of_block.size())) << "blocks scattered over the cache";
    // The caches: non-zero, finite values (no NaN code), varied.
    for (const char* name : {"key_cache", "value_cache"}) {
      const at::Tensor values = code->comparable(inputs, scalars_of(w)).at(name).to(at::kDouble);
      EXPECT_EQ(values.eq(0).sum().item<int64_t>(), 0) << name;
      EXPECT_TRUE(at::isfinite(values).all().item<bool>()) << name;
      EXPECT_GT(std::get<0>(at::_unique(values.flatten().narrow(0, 0, 1024))).numel(), 100) << name;
    }
    EXPECT_EQ(inputs.at("k_scale").item<float>(), 1.0f) << "vLLM's default scale";
  }
  const TensorMap fp8 = make_inputs(task, *code, *task.find_workload("llama3-8b-fp8-T4096"), 3);
  const float k_scale = fp8.at("k_scale").item<float>();
  EXPECT_GE(k_scale, 0.02f);
  EXPECT_LT(k_scale, 0.03f);
  EXPECT_NE(k_scale, fp8.at("v_scale").item<float>());
}

struct Variant {
  Candidate how;
  bool passes;
  const char* fails_on;  // the output the check names
};

TEST_F(RopeCacheWrite, TheCachesCompareExactlyAndCatchForeignWritesAndOtherRoundings) {
  // A bf16 cache and an fp8 one, and the heavy-tailed fp8 workload whose scales saturate (published
  // workloads at half their tokens or less, smaller caches: the check's exact pass over the cache is slow).
  const std::vector<std::pair<std::string, std::map<std::string, int64_t>>> cases = {
      {"llama3-8b-prefill-T8192", {{"T", 2048}, {"N", 2000}, {"NB", 256}}},
      {"llama3-8b-fp8-T4096", {{"T", 2048}, {"N", 2048}, {"NB", 256}}},
      {"llama3.1-8b-fp8-T2048-heavy-tail", {{"T", 1024}, {"N", 1000}, {"S", 1000}, {"NB", 1024}}}};
  for (const auto& [name, axes] : cases) {
    const Workload w = workload(name, axes);
    const Scalars scalars = scalars_of(w);
    const TensorMap inputs = make_inputs(task, *code, w, 21);
    const TensorMap want = run(inputs, scalars, true);
    const bool fp8 = w.axes.at("E") == 1;
    const int64_t written = w.axes.at("N") * w.axes.at("Hkv") * w.axes.at("D");
    std::map<std::string, Variant> variants = {
        {"an fp32 kernel (vLLM's CUDA ops)", {{}, true, ""}},
        {"eager (three bf16 roundings of k)", {{.three_roundings = true}, false, "key_cache"}},
        {"k cached before its rotation", {{.cached_before_rotation = true}, false, "key_cache"}},
    };
    if (w.axes.at("N") < w.axes.at("T")) variants["padding written (slot -1 as an index)"] = {{.padding_written = true}, false, "key_cache"};
    if (fp8) {
      variants["fp8: times the reciprocal of the scale"] = {{.rule = Fp8Rule::reciprocal}, false, "key_cache"};
      variants["fp8: the fp32 rotation quantized (FlashInfer's order)"] = {{.rule = Fp8Rule::from_fp32}, false, "key_cache"};
      variants["fp8: a float64 quotient"] = {{.rule = Fp8Rule::float64}, true, ""};
      variants["fp8: not saturated"] = {{.rule = Fp8Rule::no_saturation}, true, ""};
    }
    for (auto& [label, variant] : variants) {
      const TensorMap got = candidate(inputs, scalars, variant.how);
      const auto verdict = check(task, *code, scalars, got, want, {});
      std::map<std::string, Comparison> by_name;
      for (const auto& c : verdict.comparisons) by_name[c.name] = c;
      std::cout << name << ", " << label << ": key_cache " << by_name["key_cache"].mismatches << " and value_cache "
                << by_name["value_cache"].mismatches << " of " << written << " written elements differ; k nmse "
                << by_name["k"].nmse << "; " << (verdict.status == Status::passed ? "passed" : verdict.message) << "\n";
      // Saturation matters only where values pass 464 * scale: the heavy-tailed workload.
      bool passes = variant.passes;
      if (variant.how.rule == Fp8Rule::no_saturation) passes = name != "llama3.1-8b-fp8-T2048-heavy-tail";
      // A float64 quotient rounds to the same fp32 quotient but for a double rounding (never seen); a
      // reciprocal differs only for some scales (the next test): both pass exactly when no code moved.
      if (variant.how.rule == Fp8Rule::float64 || variant.how.rule == Fp8Rule::reciprocal)
        passes = by_name["key_cache"].mismatches + by_name["value_cache"].mismatches == 0;
      EXPECT_EQ(verdict.status == Status::passed, passes) << name << ", " << label << ": " << verdict.message;
      if (!passes && variant.fails_on[0])
        EXPECT_NE(verdict.message.find(std::string("'") + variant.fails_on + "'"), std::string::npos) << verdict.message;
      EXPECT_TRUE(by_name["q"].passed) << label;
      if (!variant.how.cached_before_rotation) EXPECT_TRUE(by_name["k"].passed) << label;
    }
  }
}

TEST_F(RopeCacheWrite, AReciprocalOfTheScaleMovesCodesForSomeScalesAndIsCaught) {
  // Every positive finite bf16 value, divided by a scale or multiplied by its fp32 reciprocal, then rounded
  // to fp8: the two differ only where one of the quotients lies within an fp32 rounding of an fp8 midpoint,
  // a property of the scale that few scales have (bf16 values have 8 significant bits).
  const at::Tensor bits = at::arange(1, 0x7f80, at::TensorOptions().dtype(at::kInt)).to(at::kShort);
  const at::Tensor x = bits.view(at::kBFloat16).to(at::kFloat);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor scales = at::empty({20000}, kF32).uniform_(0.005, 0.05, gen);
  int64_t differing_scales = 0, most = 0;
  float witness_scale = 0.0f, witness_x = 0.0f;
  for (int64_t i = 0; i < scales.numel(); ++i) {
    const at::Tensor scale = scales.narrow(0, i, 1);
    const at::Tensor by_division = fp8_bytes(x, Fp8Rule::division, scale);
    const at::Tensor by_reciprocal = fp8_bytes(x, Fp8Rule::reciprocal, scale);
    const at::Tensor moved = by_division.ne(by_reciprocal);
    const int64_t count = moved.sum().item<int64_t>();
    if (count == 0) continue;
    ++differing_scales;
    most = std::max(most, count);
    if (witness_scale == 0.0f) {
      witness_scale = scale.item<float>();
      witness_x = x.index({moved}).flatten()[0].item<float>();
    }
  }
  std::cout << "a reciprocal moves fp8 codes for " << differing_scales << " of " << scales.numel()
            << " scales in [0.005, 0.05), at most " << most << " of the 32639 positive bf16 values each\n";
  ASSERT_GT(differing_scales, 0) << "the rule would not matter";
  // Caught: a v element holding such a value, with that scale, lands on another code.
  const Workload w = workload("llama3-8b-T19-fp8-unit-scale", {});
  const Scalars scalars = scalars_of(w);
  TensorMap inputs = make_inputs(task, *code, w, 3);
  inputs["v_scale"] = at::full({1}, witness_scale, kF32);
  inputs["v"][0][0][0] = witness_x;
  const auto verdict = check(task, *code, scalars, candidate(inputs, scalars, {.rule = Fp8Rule::reciprocal}),
                             run(inputs, scalars, true), {});
  EXPECT_EQ(verdict.status, Status::incorrect_numerics) << verdict.message;
  EXPECT_NE(verdict.message.find("'value_cache': "), std::string::npos) << verdict.message;
  EXPECT_EQ(check(task, *code, scalars, candidate(inputs, scalars, {}), run(inputs, scalars, true), {}).status,
            Status::passed);
}

TEST_F(RopeCacheWrite, TheQAndKToleranceAcceptsOneOrThreeRoundingsAndRejectsWrongRotations) {
  for (const bool heavy_tail : {false, true}) {
    Workload w = workload("llama3-8b-T37-padded", {{"T", 1024}, {"N", 1024}, {"S", 24}, {"M", 131072}, {"NB", 128}});
    if (heavy_tail) w.inits["q"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
    const Scalars scalars = scalars_of(w);
    const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 17 : 13);
    const TensorMap want = run(inputs, scalars, true);
    const TensorMap one = candidate(inputs, scalars, {});
    TensorMap off_by_one = inputs;
    off_by_one["positions"] = at::remainder(inputs.at("positions") + 1, w.axes.at("M"));
    TensorMap unrotated = one;
    unrotated["q"] = inputs.at("q");
    const std::map<std::string, std::pair<TensorMap, bool>> variants = {
        {"one rounding (vLLM's CUDA op)", {one, true}},
        {"three roundings (eager)", {candidate(inputs, scalars, {.three_roundings = true}), true}},
        {"position off by one", {candidate(off_by_one, scalars, {}), false}},
        {"q not rotated", {unrotated, false}},
    };
    for (const auto& [label, variant] : variants) {
      // Only q is judged here: the rest from the oracle.
      TensorMap got = want;
      got["q"] = variant.first.at("q");
      got["k"] = want.at("k").to(at::kBFloat16);
      const auto verdict = check(task, *code, scalars, got, want, {});
      const Comparison* q = nullptr;
      for (const auto& c : verdict.comparisons)
        if (c.name == "q") q = &c;
      ASSERT_NE(q, nullptr);
      std::cout << (heavy_tail ? "heavy tail, " : "normal, ") << label << ": q nmse " << q->nmse << ", worst excess "
                << q->worst_excess << "\n";
      EXPECT_EQ(q->passed, variant.second) << label;
    }
  }
}

}  // namespace
}  // namespace d2k
