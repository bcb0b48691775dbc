// attn/merge_states against its originals: vLLM's merge_attn_states weighs the two partial outputs by
// e^(lse - max) over their sum in fp32, natural log, an LSE of +inf taken as -inf (an empty part), rounds the
// output once to bf16 and writes max + ln(sum). make_inputs gives N - F tokens one empty part, never two.
// The tolerance accepts any fp32 evaluation and rejects the hurried kernel's mistakes: +inf kept, the max
// not subtracted (overflow), base-2 exponentials, the output rounded before the division, the LSEs read as
// [N, H].
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";
const auto kF32 = at::TensorOptions().dtype(at::kFloat);
constexpr float kInf = std::numeric_limits<float>::infinity();

// How a candidate merges: the task's fp32 evaluation in one of several orders, or a mistake.
enum class Merge {
  weights,            // wa = ea / se, wb = eb / se; wa Oa + wb Ob (vLLM's order)
  divide_last,        // (ea Oa + eb Ob) / se, in fp32
  interpolate,        // Oa + wb (Ob - Oa), in fp32
  round_then_divide,  // (ea Oa + eb Ob) rounded to bf16, then / se and rounded again
  plus_inf_kept,      // only -inf taken as empty
  no_max,             // ea = e^a, eb = e^b: overflows past 88.7
  base_2,             // 2^(a - m), and m + log2(se)
  lse_token_major,    // the LSEs read as [N, H] (SGLang's and FlashInfer's layout)
};

struct MergeStates : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/merge_states"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/merge_states");

  TensorMap reference(const TensorMap& inputs, bool wide) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs) copy[name] = wide ? tensor.to(at::kDouble) : tensor.clone();
    return code->reference(copy, Scalars{});
  }

  static TensorMap candidate(const TensorMap& inputs, Merge how) {
    at::Tensor a = inputs.at("prefix_lse").clone(), b = inputs.at("suffix_lse").clone();
    if (how == Merge::lse_token_major) {
      // The same bytes read with the other layout: [H, N] memory taken as [N, H].
      a = a.contiguous().view({a.size(1), a.size(0)}).t();
      b = b.contiguous().view({b.size(1), b.size(0)}).t();
    }
    if (how != Merge::plus_inf_kept) {
      a = a.masked_fill(a == kInf, -kInf);
      b = b.masked_fill(b == kInf, -kInf);
    }
    const at::Tensor m = at::maximum(a, b);
    at::Tensor ea, eb, lse;
    if (how == Merge::no_max) {
      ea = at::exp(a), eb = at::exp(b);
      lse = at::log(ea + eb);
    } else if (how == Merge::base_2) {
      ea = at::exp2(a - m), eb = at::exp2(b - m);
      lse = m + at::log2(ea + eb);
    } else {
      ea = at::exp(a - m), eb = at::exp(b - m);
      lse = m + at::log(ea + eb);
    }
    const at::Tensor se = ea + eb;
    const auto rows = [](const at::Tensor& t) { return t.t().unsqueeze(-1); };  // [H, N] -> [N, H, 1]
    const at::Tensor x = inputs.at("prefix_output").to(at::kFloat), y = inputs.at("suffix_output").to(at::kFloat);
    at::Tensor out;
    switch (how) {
      case Merge::divide_last: out = (rows(ea) * x + rows(eb) * y) / rows(se); break;
      case Merge::interpolate: out = x + rows(eb / se) * (y - x); break;
      case Merge::round_then_divide:
        out = (rows(ea) * x + rows(eb) * y).to(at::kBFloat16).to(at::kFloat) / rows(se);
        break;
      default: out = rows(ea / se) * x + rows(eb / se) * y;
    }
    return {{"output", out.to(at::kBFloat16).contiguous()}, {"output_lse", lse.contiguous()}};
  }

  Verdict check_against_oracle(const TensorMap& inputs, const TensorMap& got) const {
    return check(task, *code, Scalars{}, got, reference(inputs, true), {});
  }
};

TensorMap rows_of(std::initializer_list<float> a, std::initializer_list<float> b, const at::Tensor& x,
                  const at::Tensor& y) {
  const auto n = static_cast<int64_t>(a.size());
  return {{"prefix_output", x.to(at::kBFloat16)},
          {"prefix_lse", at::tensor(std::vector<float>(a), kF32).view({1, n})},
          {"suffix_output", y.to(at::kBFloat16)},
          {"suffix_lse", at::tensor(std::vector<float>(b), kF32).view({1, n})}};
}

TEST_F(MergeStates, TheReferenceWeighsByNaturalExponentialsAndTakesAnEmptyPartAsWeightZero) {
  // Six tokens of one head of 2: equal LSEs; a = 0, b = ln 3 (weights 1/4 and 3/4); a prefix of -inf; a
  // prefix of +inf (FlashAttention 2's empty); an empty suffix; LSEs of 100 and 90 (e^100 overflows fp32).
  const float ln3 = std::log(3.0f);
  const at::Tensor x = at::tensor({2.0f, -1.0f, 4.0f, 8.0f, 1.5f, 3.0f, 1.5f, 3.0f, 1.25f, 0.5f, 1.0f, 2.0f}, kF32)
                           .view({6, 1, 2});
  const at::Tensor y = at::tensor({4.0f, 1.0f, 8.0f, -4.0f, 0.75f, -2.0f, 0.75f, -2.0f, 7.0f, 9.0f, 3.0f, 5.0f}, kF32)
                           .view({6, 1, 2});
  const TensorMap inputs = rows_of({1.0f, 0.0f, -kInf, kInf, 2.5f, 100.0f}, {1.0f, ln3, 5.0f, 5.0f, -kInf, 90.0f}, x, y);
  for (const bool wide : {false, true}) {
    const TensorMap out = reference(inputs, wide);
    const at::Tensor o = out.at("output").to(at::kDouble), lse = out.at("output_lse").to(at::kDouble);
    EXPECT_EQ(out.at("output").scalar_type(), wide ? at::kDouble : at::kBFloat16);
    EXPECT_EQ(out.at("output_lse").scalar_type(), wide ? at::kDouble : at::kFloat);
    // Token 0: halves; merged LSE 1 + ln 2.
    EXPECT_TRUE(at::equal(o[0][0], at::tensor({3.0, 0.0}, at::kDouble))) << o[0][0];
    EXPECT_NEAR(lse[0][0].item<double>(), 1.0 + std::log(2.0), 1e-6);
    // Token 1: 4 / 4 + 3 * 8 / 4 = 7, 8 / 4 - 3 * 4 / 4 = -1; LSE ln 4 (natural log: base 2 would give 2).
    EXPECT_NEAR(o[1][0][0].item<double>(), 7.0, 1e-6);
    EXPECT_NEAR(o[1][0][1].item<double>(), -1.0, 1e-6);
    EXPECT_NEAR(lse[0][1].item<double>(), std::log(4.0), 1e-6);
    // Tokens 2 and 3: the prefix is empty, as -inf and as +inf: the suffix's row bit for bit, its LSE.
    for (const int token : {2, 3}) {
      EXPECT_TRUE(at::equal(o[token], y[token].to(at::kDouble))) << token << ": " << o[token];
      EXPECT_EQ(lse[0][token].item<double>(), 5.0) << token;
    }
    // Token 4: the suffix is empty: the prefix's row and LSE.
    EXPECT_TRUE(at::equal(o[4], x[4].to(at::kDouble))) << o[4];
    EXPECT_EQ(lse[0][4].item<double>(), 2.5);
    // Token 5: weights 1 / (1 + e^-10) and e^-10 / (1 + e^-10), finite: the max comes off first.
    const double w = std::exp(-10.0) / (1.0 + std::exp(-10.0));
    EXPECT_NEAR(o[5][0][0].item<double>(), 1.0 * (1 - w) + 3.0 * w, wide ? 1e-12 : 4e-3);
    EXPECT_NEAR(o[5][0][1].item<double>(), 2.0 * (1 - w) + 5.0 * w, wide ? 1e-12 : 8e-3);
    EXPECT_NEAR(lse[0][5].item<double>(), 100.0 + std::log1p(std::exp(-10.0)), wide ? 1e-12 : 1e-5);
  }
}

TEST_F(MergeStates, MakeInputsEmptiesOnePartOfNMinusFTokensOverAllHeadsNeverBoth) {
  for (const char* name : {"llama3-8b-N37-empty-heavy", "deepseek-v3-tp8-mla-N5", "llama3-70b-tp8-N1001"}) {
    const Workload& workload = *task.find_workload(name);
    const int64_t tokens = workload.axes.at("N"), full = workload.axes.at("F");
    const TensorMap inputs = make_inputs(task, *code, workload, 11);
    const at::Tensor a = inputs.at("prefix_lse"), b = inputs.at("suffix_lse");
    ASSERT_EQ(a.sizes(), (std::vector<int64_t>{workload.axes.at("H"), tokens})) << name;
    const at::Tensor a_empty = at::isinf(a), b_empty = at::isinf(b);
    // A token's part is empty over all its heads or over none.
    EXPECT_TRUE(at::equal(a_empty.all(0), a_empty.any(0))) << name;
    EXPECT_TRUE(at::equal(b_empty.all(0), b_empty.any(0))) << name;
    EXPECT_FALSE((a_empty.any(0) & b_empty.any(0)).any().item<bool>()) << name << ": a token with both parts empty";
    EXPECT_EQ((a_empty.any(0) | b_empty.any(0)).sum().item<int64_t>(), tokens - full) << name;
    // Both sides and both signs when there are four or more.
    const int64_t empty = tokens - full;
    EXPECT_EQ(a_empty.any(0).sum().item<int64_t>(), (empty + 1) / 2) << name;
    EXPECT_EQ(((a == kInf) | (b == kInf)).any(0).sum().item<int64_t>(), empty / 4 * 2 + std::max<int64_t>(0, empty % 4 - 2))
        << name;
    EXPECT_TRUE(at::isfinite(inputs.at("prefix_output").to(at::kFloat)).all().item<bool>()) << name;
  }
}

TEST_F(MergeStates, TheToleranceAcceptsAnyFp32EvaluationAndRejectsTheHurriedMistakes) {
  // 1024 tokens of 32 heads of 128 with a quarter of them empty on one side; normal and heavy-tailed LSEs.
  for (const bool heavy : {false, true}) {
    Workload workload = *task.find_workload(heavy ? "llama3-8b-N4096-heavy-lse" : "llama3-8b-N4096-empty");
    workload.axes["N"] = 1024;
    workload.axes["F"] = 768;
    const TensorMap inputs = make_inputs(task, *code, workload, heavy ? 23 : 17);
    const std::vector<std::tuple<std::string, TensorMap, bool, bool>> variants = {
        // name, outputs, output passes, output_lse passes
        {"fp32 weights (vLLM's order)", candidate(inputs, Merge::weights), true, true},
        {"fp32, divided last", candidate(inputs, Merge::divide_last), true, true},
        {"fp32, interpolated", candidate(inputs, Merge::interpolate), true, true},
        {"the eager reference", reference(inputs, false), true, true},
        {"rounded to bf16 before the division", candidate(inputs, Merge::round_then_divide), false, true},
        {"+inf kept", candidate(inputs, Merge::plus_inf_kept), false, false},
        {"base 2", candidate(inputs, Merge::base_2), false, false},
        {"LSEs read as [N, H]", candidate(inputs, Merge::lse_token_major), false, false},
        {"no max subtracted", candidate(inputs, Merge::no_max), !heavy, !heavy},
    };
    for (const auto& [name, got, output_passes, lse_passes] : variants) {
      const Verdict verdict = check_against_oracle(inputs, got);
      ASSERT_EQ(verdict.comparisons.size(), 2u) << name;
      for (const Comparison& c : verdict.comparisons) {
        std::cout << (heavy ? "heavy-tailed, " : "normal, ") << name << ", " << c.name << ": nmse " << c.nmse
                  << ", worst excess " << c.worst_excess << ", non-finite " << c.non_finite
                  << ", misrounded " << c.misrounded.value_or(-1) << "\n";
        EXPECT_EQ(c.passed, c.name == "output" ? output_passes : lse_passes) << name << ", " << c.name;
      }
      EXPECT_EQ(verdict.status == Status::passed, output_passes && lse_passes) << name << ": " << verdict.message;
    }
  }
}

}  // namespace
}  // namespace d2k
