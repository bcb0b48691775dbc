// attn/decode_mla against its definition and its originals: a hand-computed batch (pages found through the
// block table in its order, a partial last page cut at seq_len, the 64 rotary columns counted in the score
// and left out of the output, V the first 512 columns of the same rows, the LSE [B, H] in natural log of the
// scaled scores, a one-token context gives o = the first 512 values of its row); torch's own attention
// kernel on the gathered rows (K 576 wide, V 512 wide) agrees on o and on the LSE's base and layout;
// make_inputs gives the workload's lengths in a random order with distinct pages scattered over the cache.
// The tolerance accepts what FlashMLA computes (fp32 scores and softmax, bf16 probabilities, split-KV merged
// by LSE) and rejects V taken from the last 512 columns, the score without the rotary columns, pages read as
// if contiguous, the last partial page read past seq_len, a base-2 LSE, the sum over the bf16
// probabilities and the scale 576^-0.5 in place of the given one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <numbers>
#include <set>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "attention_verdicts.hpp"
#include "reference/inputs.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";
const auto kF64 = at::TensorOptions().dtype(at::kDouble);
const auto kI32 = at::TensorOptions().dtype(at::kInt);
constexpr int64_t kPage = 64, kWidth = 576, kValues = 512;

// What a candidate computes, and the mistakes it makes.
struct Candidate {
  bool round_p = true;            // p rounded to bf16 before p v (FlashMLA); the sum of the fp32 p
  bool sum_rounded_p = false;     // the sum taken over the bf16 p instead (the lse then carries its rounding)
  int64_t split = 0;              // > 0: the context cut into parts of this many keys, merged by their LSEs in fp32
  int64_t value_column = 0;       // V = columns [value_column, value_column + 512): 64 is the last 512
  int64_t key_columns = kWidth;   // 512: the score without the rotary columns
  bool pages_contiguous = false;  // page j of a sequence read at block_table[b, 0] + j (mod NB)
  bool past_seq_len = false;      // the whole last page read as keys, its rows past seq_len included
  bool lse_base2 = false;         // lse as log2(sum of exp)
  bool scale_from_width = false;  // 576^-0.5 in place of the given scale
};

struct DecodeMla : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/decode_mla"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/decode_mla");

  static Scalars scalars_of(const Workload& w, double scale) {
    Scalars scalars;
    scalars.axes = w.axes;
    scalars.values["softmax_scale"] = scale;
    return scalars;
  }
  // A workload with these lengths (B, Lmin, Lmax) and heads; N, P, NB (P and 5 spare pages), MB follow.
  Workload workload(int64_t count, int64_t shortest, int64_t longest, int64_t heads) const {
    Workload w = *task.find_workload("deepseek-v3-B3-ctx1-130");
    int64_t tokens = 0, pages = 0;
    for (int64_t b = 0; b < count; ++b) {
      const int64_t length = count == 1 ? shortest : shortest + b * (longest - shortest) / (count - 1);
      tokens += length, pages += (length + kPage - 1) / kPage;
    }
    w.axes = {{"B", count},         {"Lmin", shortest}, {"Lmax", longest}, {"N", tokens},
              {"P", pages},         {"NB", pages + 5},  {"MB", (longest + kPage - 1) / kPage + 2}, {"H", heads}};
    return w;
  }
  // The reference on these inputs, natively or in float64 (the oracle).
  TensorMap run(const TensorMap& inputs, const Scalars& scalars, bool wide) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs)
      copy[name] = wide && at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor;
    return code->reference(copy, scalars);
  }

  // One part of a context, every head at once: fp32 scores of the bf16 inputs [H, n], the maximum per head,
  // p = exp(s - max) in fp32 (rounded to bf16 for p v where the kernel rounds it), the sum, o = (p v) / sum,
  // lse = max + log(sum).
  static std::pair<at::Tensor, at::Tensor> attend(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                                                  float factor, const Candidate& how) {
    const at::Tensor s = at::matmul(query, keys.t()).mul(factor);
    const at::Tensor max = std::get<0>(s.max(1, /*keepdim=*/true));
    const at::Tensor p = at::exp(s - max), rounded = p.to(at::kBFloat16).to(at::kFloat);
    const at::Tensor sum = (how.sum_rounded_p ? rounded : p).sum(1, /*keepdim=*/true);
    const at::Tensor o = at::matmul(how.round_p ? rounded : p, values) / sum;
    return {o, (max.to(at::kDouble) + at::log(sum.to(at::kDouble))).view({-1})};
  }

  // A kernel's arithmetic, written out per sequence.
  static TensorMap candidate(const TensorMap& inputs, double scale, const Candidate& how) {
    const at::Tensor q = inputs.at("q").to(at::kFloat), cache = inputs.at("kv_cache").to(at::kFloat);
    const at::Tensor table = inputs.at("block_table").to(at::kLong), lengths = inputs.at("seq_lens").to(at::kLong);
    const int64_t batch = q.size(0), heads = q.size(1), blocks = cache.size(0);
    at::Tensor o = at::empty({batch, heads, kValues}, at::TensorOptions().dtype(at::kBFloat16));
    at::Tensor lse = at::empty({batch, heads}, at::TensorOptions().dtype(at::kFloat));
    const float factor = static_cast<float>(how.scale_from_width ? 1.0 / std::sqrt(576.0) : scale);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t length = lengths[b].item<int64_t>(), pages = (length + kPage - 1) / kPage;
      const at::Tensor ids = how.pages_contiguous ? at::remainder(at::arange(pages, at::kLong) + table[b][0], blocks)
                                                  : table[b].narrow(0, 0, pages);
      const int64_t read = how.past_seq_len ? pages * kPage : length;
      const at::Tensor rows = cache.index_select(0, ids).view({-1, kWidth}).narrow(0, 0, read);
      const at::Tensor keys = rows.narrow(1, 0, how.key_columns), values = rows.narrow(1, how.value_column, kValues);
      const at::Tensor query = q[b].narrow(1, 0, how.key_columns);
      at::Tensor out, row_lse;
      if (how.split > 0) {
        // Each part's normalized output and LSE, merged in fp32: weights exp(lse_s - max) / their sum.
        std::vector<std::pair<at::Tensor, at::Tensor>> parts;
        for (int64_t first = 0; first < read; first += how.split) {
          const int64_t n = std::min(how.split, read - first);
          parts.push_back(attend(query, keys.narrow(0, first, n), values.narrow(0, first, n), factor, how));
        }
        at::Tensor max = at::full({heads}, -std::numeric_limits<double>::infinity(), kF64);
        for (const auto& part : parts) max = at::maximum(max, part.second);
        at::Tensor sum = at::zeros({heads}, kF64);
        out = at::zeros({heads, kValues}, at::TensorOptions().dtype(at::kFloat));
        for (const auto& part : parts) sum += at::exp(part.second - max);
        for (const auto& part : parts) out += part.first * (at::exp(part.second - max) / sum).to(at::kFloat).unsqueeze(1);
        row_lse = max + at::log(sum);
      } else {
        std::tie(out, row_lse) = attend(query, keys, values, factor, how);
      }
      o[b].copy_(out);
      lse[b].copy_(how.lse_base2 ? row_lse / std::numbers::ln2 : row_lse);
    }
    return {{"o", o}, {"lse", lse}};
  }
};

TEST_F(DecodeMla, AHandComputedBatchShowsThePagesTheColumnsAndTheNaturalLogLse) {
  // 3 pages of 64 rows of 576, 2 heads, scale 0.5. Head 0 asks column 0 (a latent column), head 1 column 512
  // (the first rotary column). Every row starts as another sequence's: columns 0 and 512 hold 3 (score 1.5
  // for either head), column 1 holds 100 and column 575 holds 50: no result below contains them.
  // Sequence 0, 66 tokens: logical page 0 is physical page 2, logical page 1 is physical page 0 (rows 0 and 1;
  // rows 2..63 are past seq_len). Token t's row is zero but column 1 = t and column 575 = -7 (a rotary value,
  // out of V). Token 65: column 0 = 2 ln 65 (head 0's score ln 65: weight 65 beside 65 ones); token 0:
  // column 512 = 2 ln 3 (head 1's score ln 3: weight 3 beside 65 ones).
  // Sequence 1, 1 token at physical page 1, row 0: column 0 = 4, 5 = 9, 512 = -2, 575 = 11.
  // Table rows [2, 0, 1] and [1, 2, 0]: their unused entries name pages that hold other data.
  const double ln65 = std::log(65.0), ln3 = std::log(3.0);
  at::Tensor cache = at::zeros({3, kPage, kWidth}, kF64);
  cache.select(2, 0).fill_(3.0), cache.select(2, 512).fill_(3.0);
  cache.select(2, 1).fill_(100.0), cache.select(2, 575).fill_(50.0);
  for (int64_t t = 0; t < 66; ++t) {
    at::Tensor row = cache[t < 64 ? 2 : 0][t % 64];
    row.zero_();
    row[1] = static_cast<double>(t);
    row[575] = -7.0;
  }
  cache[0][1][0] = 2 * ln65;  // token 65
  cache[2][0][512] = 2 * ln3;  // token 0
  cache[1][0].zero_();
  cache[1][0][0] = 4.0, cache[1][0][5] = 9.0, cache[1][0][512] = -2.0, cache[1][0][575] = 11.0;
  at::Tensor q = at::zeros({2, 2, kWidth}, kF64);
  q.select(1, 0).select(1, 0).fill_(1.0);
  q.select(1, 1).select(1, 512).fill_(1.0);
  Scalars scalars;
  scalars.values["softmax_scale"] = 0.5;
  TensorMap inputs{{"q", q},
                   {"kv_cache", cache},
                   {"block_table", at::tensor({2, 0, 1, 1, 2, 0}, kI32).view({2, 3})},
                   {"seq_lens", at::tensor({66, 1}, kI32)}};
  const TensorMap out = code->reference(inputs, scalars);
  const at::Tensor o = out.at("o"), lse = out.at("lse");
  ASSERT_EQ(o.sizes(), (std::vector<int64_t>{2, 2, kValues}));
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{2, 2})) << "[B, H]: sequence-major, FlashMLA's softmax_lse with s_q = 1";
  const auto expect = [](const at::Tensor& got, std::vector<double> want, const char* what) {
    EXPECT_TRUE(at::allclose(got.flatten(), at::tensor(want, kF64), 1e-12, 1e-12)) << what << ": " << got;
  };
  // Head 0: weight 1/130 on tokens 0..64 and 1/2 on token 65: column 0 = ln 65, column 1 = 2080 / 130 + 32.5.
  // Head 1: weight 3/68 on token 0, 1/68 on tokens 1..65: column 0 = 2 ln 65 / 68, column 1 = 2145 / 68.
  expect(o[0].narrow(1, 0, 2), {ln65, 48.5, 2 * ln65 / 68, 2145.0 / 68}, "sequence 0: its two pages in table order, cut at 66");
  EXPECT_EQ(o[0].narrow(1, 2, kValues - 2).abs().max().item<double>(), 0.0) << "columns 2..511 are zero: column 575 is not a value";
  expect(lse[0], {std::log(130.0), std::log(68.0)}, "sequence 0's lse, natural log; head 1's counts the rotary column");
  expect(o[1].narrow(1, 0, 6), {4, 0, 0, 0, 0, 9, 4, 0, 0, 0, 0, 9}, "a one-token context: o = its row's first 512 values");
  EXPECT_EQ(o[1].narrow(1, 6, kValues - 6).abs().max().item<double>(), 0.0);
  expect(lse[1], {2, -1}, "its lse is its one score, 0.5 * q.c, the rotary column included");
}

TEST_F(DecodeMla, TorchsAttentionKernelAgreesOnOAndOnTheLsesBaseAndLayout) {
  // The library path on the cpu (torch's flash kernel on the gathered rows, K 576 and V 512 wide, natural-log
  // LSE [1, H, 1] per sequence) against the float64 oracle: the same o and lse within the tolerance.
  const Workload w = workload(3, 1, 300, 16);
  const Scalars scalars = scalars_of(w, 0.1352337788608801);
  TensorMap inputs = make_inputs(task, *code, w, 5);
  const TensorMap want = run(inputs, scalars, true);
  const auto verdict = check(task, *code, scalars, code->library(inputs, scalars), want, {});
  for (const auto& c : verdict.comparisons)
    std::cout << "torch's cpu flash kernel: " << c.name << " nmse " << c.nmse << ", worst element " << c.worst_excess << " of its bound\n";
  EXPECT_EQ(verdict.status, Status::passed) << verdict.message;
}

TEST_F(DecodeMla, MakeInputsScattersDistinctPagesAndGivesTheWorkloadsLengths) {
  // Every workload's axes agree with its progression of lengths (N, P, MB; NB holds the P pages).
  for (const auto& w : task.workloads) {
    const auto axis = [&](const char* name) { return w.axes.at(name); };
    int64_t tokens = 0, pages = 0;
    for (int64_t b = 0; b < axis("B"); ++b) {
      const int64_t length = axis("B") == 1 ? axis("Lmin") : axis("Lmin") + b * (axis("Lmax") - axis("Lmin")) / (axis("B") - 1);
      tokens += length, pages += (length + kPage - 1) / kPage;
    }
    EXPECT_EQ(tokens, axis("N")) << w.name;
    EXPECT_EQ(pages, axis("P")) << w.name;
    EXPECT_LE(pages, axis("NB")) << w.name;
    EXPECT_GE(axis("MB"), (axis("Lmax") + kPage - 1) / kPage) << w.name;
  }
  for (const auto& w : task.workloads) {
    // The cache is drawn whole whatever H is (576 columns, 1.5 GB of float32 at NB 10240): the structure of
    // the draw is checked on the workloads of 1100 pages or fewer (the smoke ones, B 1 and the hidden one).
    if (w.axes.at("NB") > 1100) continue;
    Workload small = w;
    small.axes["H"] = 1;
    const TensorMap inputs = make_inputs(task, *code, small, 3);
    const at::Tensor lengths = inputs.at("seq_lens").to(at::kLong), table = inputs.at("block_table").to(at::kLong);
    ASSERT_EQ(lengths.numel(), w.axes.at("B")) << w.name;
    ASSERT_EQ(table.sizes(), (std::vector<int64_t>{w.axes.at("B"), w.axes.at("MB")})) << w.name;
    EXPECT_EQ(inputs.at("kv_cache").sizes(), (std::vector<int64_t>{w.axes.at("NB"), kPage, kWidth})) << w.name;
    EXPECT_EQ(lengths.min().item<int64_t>(), w.axes.at("Lmin")) << w.name;
    EXPECT_EQ(lengths.max().item<int64_t>(), w.axes.at("Lmax")) << w.name;
    EXPECT_EQ(lengths.sum().item<int64_t>(), w.axes.at("N")) << w.name;
    EXPECT_GE(table.min().item<int64_t>(), 0) << w.name;
    EXPECT_LT(table.max().item<int64_t>(), w.axes.at("NB")) << w.name;
    // The used pages: P of them, all distinct; some sequence's pages are not consecutive numbers.
    std::set<int64_t> used;
    bool scattered = false;
    const auto length = lengths.accessor<int64_t, 1>();
    const auto entry = table.accessor<int64_t, 2>();
    for (int64_t b = 0; b < lengths.numel(); ++b) {
      for (int64_t j = 0; j < (length[b] + kPage - 1) / kPage; ++j) {
        used.insert(entry[b][j]);
        if (j > 0 && entry[b][j] != entry[b][j - 1] + 1) scattered = true;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(used.size()), w.axes.at("P")) << w.name << ": a page shared by two sequences";
    if (w.axes.at("P") > w.axes.at("B")) EXPECT_TRUE(scattered) << w.name;
  }
  // The order is random: the hidden batch is neither sorted nor the same for two seeds.
  Workload odd = *task.find_workload("deepseek-v3-B37-ctx1-3001-odd");
  odd.axes["H"] = 1;
  const at::Tensor a = make_inputs(task, *code, odd, 3).at("seq_lens"), b = make_inputs(task, *code, odd, 4).at("seq_lens");
  EXPECT_TRUE(at::equal(a, make_inputs(task, *code, odd, 3).at("seq_lens"))) << "deterministic in the seed";
  EXPECT_FALSE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, std::get<0>(a.sort()))) << "not sorted";
  EXPECT_EQ(a.min().item<int64_t>(), 1) << "a one-token context";
  // A workload whose P disagrees with its lengths is refused, naming the axis.
  Workload wrong = odd;
  wrong.axes["P"] += 1;
  try {
    make_inputs(task, *code, wrong, 3);
    ADD_FAILURE() << "a wrong P was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("P = 887"), std::string::npos) << e.what();
  }
}

struct Variant {
  const char* label;
  Candidate how;
  bool o_passes, lse_passes;
};

TEST_F(DecodeMla, TheToleranceAcceptsFlashMlasArithmeticAndRejectsTheHurriedMistakes) {
  // 5 sequences of 1 to 700 tokens (most ending mid-page), 16 heads, DeepSeek-V3's scale; the published
  // normal latent and the hidden workload's heavy-tailed one.
  for (const bool heavy_tail : {false, true}) {
    Workload w = workload(5, 1, 700, 16);
    if (heavy_tail) w.inits["kv_cache"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
    const double scale = 0.1352337788608801;
    const Scalars scalars = scalars_of(w, scale);
    const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 17 : 13);
    const TensorMap want = run(inputs, scalars, true);
    const std::vector<Variant> variants = {
        {"FlashMLA (bf16 p)", {}, true, true},
        {"fp32 p", {.round_p = false}, true, true},
        {"split-KV in parts of 64 keys, merged by LSE", {.split = 64}, true, true},
        {"the sum over the bf16 p", {.sum_rounded_p = true}, true, false},
        {"V from the last 512 columns", {.value_column = 64}, false, true},
        {"the score without the rotary columns", {.key_columns = 512}, false, false},
        {"pages read as if contiguous", {.pages_contiguous = true}, false, false},
        {"the last page read past seq_len", {.past_seq_len = true}, false, false},
        {"lse in base 2", {.lse_base2 = true}, true, false},
        {"the scale 576^-0.5", {.scale_from_width = true}, false, false},
    };
    for (const auto& variant : variants) {
      expect_o_and_lse(std::string(heavy_tail ? "heavy-tailed latent, " : "normal, ") + variant.label,
                       check(task, *code, scalars, candidate(inputs, scale, variant.how), want, {}), variant.o_passes,
                       variant.lse_passes);
    }
    // The eager baseline (bf16 scores, scaled in bf16) is timed, not held to the tolerance.
    const auto eager = check(task, *code, scalars, run(inputs, scalars, false), want, {});
    print_verdict(std::string(heavy_tail ? "heavy-tailed latent, " : "normal, ") + "eager (bf16 scores)", eager);
    EXPECT_EQ(eager.status, Status::incorrect_numerics);
  }
}

}  // namespace
}  // namespace d2k
