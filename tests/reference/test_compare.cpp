#include "reference/compare.hpp"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <utility>

namespace d2k {
namespace {

at::Tensor random_tensor(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, {n}, gen, at::TensorOptions().dtype(at::kDouble));
}

Tolerance bf16_like() { return Tolerance{Tolerance::Metric::numeric, 1e-5, 0.016, 0.002}; }

TEST(Compare, Bf16RoundingPassesAgainstFloat64) {
  const auto want = random_tensor(4096, 1);
  const auto got = want.to(at::kBFloat16);
  const auto c = compare("y", got, want, bf16_like());
  EXPECT_TRUE(c.passed) << "nmse " << c.nmse << " excess " << c.worst_excess;
  EXPECT_GT(c.nmse, 0.0);
  EXPECT_EQ(c.mismatches, 0);
}

// A bf16 value truncated instead of rounded to nearest even: within nmse and every element's bound, but
// off the correctly rounded value in about half the elements, which `misrounded` counts.
at::Tensor truncated_bf16(const at::Tensor& want) {
  const auto bits = want.to(at::kFloat).view(at::kInt);
  return at::bitwise_and(bits, static_cast<int64_t>(0xffff0000u)).view(at::kFloat).to(at::kBFloat16);
}

TEST(Compare, MisroundedCountsElementsOffTheCorrectlyRoundedValue) {
  const auto want = random_tensor(3 * (1 << 20) + 17, 5);  // several chunks of the count
  Tolerance tolerance = bf16_like();
  tolerance.nmse = 2e-5;  // truncation's nmse here is about 1.1e-5: inside a bound a task might set
  tolerance.misrounded = 0.001;
  const auto rounded = compare("y", want.to(at::kBFloat16), want, tolerance);
  EXPECT_TRUE(rounded.passed);
  ASSERT_TRUE(rounded.misrounded);
  EXPECT_LT(*rounded.misrounded, 1e-4);  // float64 -> bf16 goes through float32: a rare double rounding
  const auto truncated = compare("y", truncated_bf16(want), want, tolerance);
  ASSERT_TRUE(truncated.misrounded);
  EXPECT_GT(*truncated.misrounded, 0.4);
  EXPECT_FALSE(truncated.passed);
  EXPECT_EQ(truncated.mismatches, 0);  // what nmse and the bounds alone let through
  EXPECT_LE(truncated.nmse, tolerance.nmse);
  tolerance.misrounded.reset();
  EXPECT_TRUE(compare("y", truncated_bf16(want), want, tolerance).passed);
  EXPECT_FALSE(compare("y", truncated_bf16(want), want, tolerance).misrounded);
}

// Outputs of millions of elements are compared in parallel chunks of 2^20: the statistics must be
// those of one pass over everything, with the worst element found in whichever chunk holds it.
TEST(Compare, ChunkedPassesFindTheWorstElementAcrossChunks) {
  const int64_t n = 3 * (1 << 20) + 12345;
  const auto want = random_tensor(n, 7);
  auto got = want.to(at::kBFloat16);
  const int64_t bad = 2 * (1 << 20) + 99;  // in the third chunk
  got[bad] = want[bad].item<double>() + 50.0;
  const auto finite = compare("y", got, want, bf16_like());
  EXPECT_FALSE(finite.passed);
  EXPECT_EQ(finite.worst_index, bad);
  EXPECT_DOUBLE_EQ(finite.worst_got, got[bad].item<double>());
  got[n - 1] = std::numeric_limits<float>::quiet_NaN();  // in the last, partial chunk
  const auto c = compare("y", got, want, bf16_like());
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.elements, n);
  EXPECT_EQ(c.non_finite, 1);
  EXPECT_EQ(c.worst_index, n - 1);  // a NaN is an infinite error
  EXPECT_GE(c.mismatches, 2);
  const auto diff = (got.to(at::kDouble) - want).abs().nan_to_num(0.0);
  EXPECT_DOUBLE_EQ(c.max_abs_error, std::numeric_limits<double>::infinity());
  EXPECT_EQ(diff.argmax().item<int64_t>(), bad);
}

// On a GPU the same metric is computed by whole-tensor expressions (compare_whole); run here on the CPU,
// it must agree with the chunked loops field by field, on data with every special case in it.
TEST(Compare, WholeTensorPassAgreesWithTheChunkedLoops) {
  const int64_t n = 2 * (1 << 20) + 777;
  auto want = random_tensor(n, 11);
  want.narrow(0, 100, 50).zero_();  // zeros in the oracle: no relative error there
  auto got = want.to(at::kBFloat16);
  got.narrow(0, 100, 10).fill_(0.25);               // wrong where the oracle is zero
  got[5000] = std::numeric_limits<float>::infinity();
  got[n - 3] = std::numeric_limits<float>::quiet_NaN();
  got[(1 << 20) + 5] = want[(1 << 20) + 5].item<double>() + 3.0;
  for (const auto& [label, g] : {std::pair<const char*, at::Tensor>{"special values", got},
                                 {"exact bf16 rounding", want.to(at::kBFloat16)},
                                 {"identical", want}}) {
    SCOPED_TRACE(label);
    Tolerance tolerance = bf16_like();
    if (g.scalar_type() != at::kDouble) tolerance.misrounded = 0.01;  // a share of bf16 outputs only
    const auto loops = compare("y", g, want, tolerance);
    const auto whole = compare_whole("y", g, want, tolerance);
    EXPECT_EQ(whole.passed, loops.passed);
    EXPECT_EQ(whole.misrounded, loops.misrounded);
    EXPECT_EQ(whole.elements, loops.elements);
    EXPECT_EQ(whole.non_finite, loops.non_finite);
    EXPECT_EQ(whole.mismatches, loops.mismatches);
    EXPECT_EQ(whole.worst_index, loops.worst_index);
    EXPECT_DOUBLE_EQ(whole.worst_excess, loops.worst_excess);
    EXPECT_DOUBLE_EQ(whole.max_abs_error, loops.max_abs_error);
    EXPECT_DOUBLE_EQ(whole.max_rel_error, loops.max_rel_error);
    if (std::isfinite(loops.nmse)) {
      EXPECT_NEAR(whole.nmse, loops.nmse, 1e-12 * std::max(1.0, loops.nmse));
    } else {
      EXPECT_EQ(whole.nmse, loops.nmse);
    }
  }
}

TEST(Compare, RowScaleHoldsEachRowToItsOwnMagnitude) {
  // 64 rows of 256: row 0 ten times the others (a token with a large norm). The output's rms is
  // sqrt((100 + 63) / 64) = 1.6; row 0's is 10, the others' 1.
  auto want = random_tensor(64 * 256, 6).view({64, 256});
  want[0].mul_(10.0);
  want[0][7] = 0.0;
  want[5][9] = 0.0;
  Tolerance by_output = bf16_like();
  Tolerance by_row = bf16_like();
  by_row.atol_scale = Tolerance::AtolScale::row;
  const double output_rms = std::sqrt(want.square().mean().item<double>());
  const double row0_rms = std::sqrt(want[0].square().mean().item<double>());
  const double row5_rms = std::sqrt(want[5].square().mean().item<double>());
  ASSERT_GT(row0_rms, 5 * output_rms);
  ASSERT_LT(row5_rms, output_rms);

  // An error of the large row's size: beyond the output's bound, within its row's.
  auto big = want.clone();
  big[0][7] = 0.002 * (output_rms + row0_rms) / 2;
  EXPECT_FALSE(compare("y", big, want, by_output).passed);
  EXPECT_TRUE(compare("y", big, want, by_row).passed);
  // An error a typical row's bound does not admit, though the output's would: the row scale is stricter there.
  auto small = want.clone();
  small[5][9] = 0.002 * (row5_rms + output_rms) / 2;
  EXPECT_TRUE(compare("y", small, want, by_output).passed);
  const auto strict = compare("y", small, want, by_row);
  EXPECT_FALSE(strict.passed);
  EXPECT_EQ(strict.worst_index, 5 * 256 + 9);
}

TEST(Compare, RowScaleWholeTensorPassAgreesWithTheChunkedLoops) {
  // Rows of 60013 elements: they straddle the loops' 2^20-element chunks.
  auto want = random_tensor(37 * 60013, 12).view({37, 60013});
  want[3].mul_(30.0);
  auto got = want.to(at::kBFloat16).to(at::kDouble);
  got[3][60000] = got[3][60000].item<double>() + 0.04;  // within row 3's bound (0.06), not the output's (0.01)
  got[20][5] = got[20][5].item<double>() + 0.01;       // beyond row 20's bound
  Tolerance tolerance = bf16_like();
  tolerance.atol_scale = Tolerance::AtolScale::row;
  const auto loops = compare("y", got, want, tolerance);
  const auto whole = compare_whole("y", got, want, tolerance);
  EXPECT_FALSE(loops.passed);
  EXPECT_EQ(loops.mismatches, 1);
  EXPECT_EQ(loops.worst_index, 20 * 60013 + 5);
  EXPECT_EQ(whole.mismatches, loops.mismatches);
  EXPECT_EQ(whole.worst_index, loops.worst_index);
  EXPECT_DOUBLE_EQ(whole.worst_excess, loops.worst_excess);
}

TEST(Compare, Fp8PrecisionFailsABf16Tolerance) {
  const auto want = random_tensor(4096, 2);
  const auto got = want.to(at::kFloat8_e4m3fn);
  const auto c = compare("y", got, want, bf16_like());
  EXPECT_FALSE(c.passed);
  EXPECT_GT(c.nmse, 1e-5);
}

TEST(Compare, OneWrongElementAmongManyFails) {
  const auto want = random_tensor(1 << 16, 3);
  auto got = want.clone();
  got[12345] = got[12345].item<double>() + 1.0;
  const auto c = compare("y", got, want, bf16_like());
  EXPECT_FALSE(c.passed);  // the NMSE alone would not see it; the elementwise bound does
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.worst_index, 12345);
}

TEST(Compare, NanFailsAndIsCounted) {
  const auto want = random_tensor(100, 4);
  auto got = want.clone();
  got[7] = std::numeric_limits<double>::quiet_NaN();
  const auto c = compare("y", got, want, bf16_like());
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.non_finite, 1);
}

TEST(Compare, TinyOutputsCannotPassOnAbsoluteTolerance) {
  // Outputs of scale 1e-6: zeros would pass any absolute tolerance of 1e-3, not a scale-aware one.
  const auto want = random_tensor(1000, 5) * 1e-6;
  const auto c = compare("y", at::zeros_like(want), want, bf16_like());
  EXPECT_FALSE(c.passed);
}

TEST(Compare, ExactMetricCountsUnequalIntegers) {
  auto want = at::arange(0, 64, at::TensorOptions().dtype(at::kInt));
  auto got = want.clone();
  got[3] = 4;
  got[9] = 8;
  const auto c = compare("ids", got, want, Tolerance{Tolerance::Metric::exact});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.worst_index, 3);
  EXPECT_TRUE(compare("ids", want, want, Tolerance{Tolerance::Metric::exact}).passed);
}

// The exact pass runs in chunks of 4 M elements: the counts add up across chunks, the first unequal element
// is reported wherever it lies, and a floating value compares in float64 against the oracle's (a bf16 value
// one ulp off is unequal; a NaN is unequal and non-finite).
TEST(Compare, ExactMetricAcrossChunksReportsTheFirstUnequalElement) {
  const int64_t n = (int64_t{1} << 22) * 2 + 5;
  auto want = at::arange(0, n, at::TensorOptions().dtype(at::kLong)).remainder(251).to(at::kByte);
  auto got = want.clone();
  got[(int64_t{1} << 22) + 7] = 0;
  got[(int64_t{1} << 22) + 7 + 3] = 0;  // want is 7 and 10 there
  got[n - 1] = 0;
  auto c = compare("cache", got, want, Tolerance{Tolerance::Metric::exact});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.mismatches, 3);
  EXPECT_EQ(c.worst_index, (int64_t{1} << 22) + 7);
  EXPECT_EQ(c.worst_want, static_cast<double>(((int64_t{1} << 22) + 7) % 251));
  EXPECT_EQ(c.worst_got, 0.0);

  const auto exact = at::tensor({1.0, 2.0, 3.0}, at::TensorOptions().dtype(at::kDouble));
  auto values = exact.to(at::kBFloat16);
  EXPECT_TRUE(compare("v", values, exact, Tolerance{Tolerance::Metric::exact}).passed);
  values[1] = 2.015625;  // one bf16 ulp above 2
  values[2] = std::numeric_limits<float>::quiet_NaN();
  c = compare("v", values, exact, Tolerance{Tolerance::Metric::exact});
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.non_finite, 1);
  EXPECT_EQ(c.worst_index, 1);
}

}  // namespace
}  // namespace d2k
