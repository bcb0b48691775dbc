// attn/decode_paged_gqa against its definition and its originals: a hand-computed batch (pages found through
// the block table in its order, a partial last page cut at seq_len, query head h reads KV head h / G, the LSE
// in natural log of the scaled scores, a one-token context gives o = v); torch's own flash kernel on the
// gathered K/V agrees on o and on the LSE's base and layout; make_inputs gives the workload's lengths in a
// random order with distinct pages scattered over the cache. The tolerance accepts what a FlashDecoding
// kernel computes (fp32 scores and softmax, bf16 probabilities, split-KV merged by LSE) and rejects pages
// read as if contiguous, the last partial page read past seq_len, the KV head taken as h % Hkv, a base-2 LSE,
// the sum over the bf16 probabilities and the scale applied twice.
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

// What a candidate computes, and the mistakes it makes.
struct Candidate {
  bool round_p = true;           // p rounded to bf16 before p v (FlashAttention, FlashInfer); the sum of the fp32 p
  bool sum_rounded_p = false;    // the sum taken over the bf16 p instead (the lse then carries its rounding)
  int64_t split = 0;             // > 0: the context cut into parts of this many keys, merged by their LSEs in fp32
  bool pages_contiguous = false;  // page j of a sequence read at block_table[b, 0] + j (mod NB)
  bool past_seq_len = false;     // the whole last page read as keys, its rows past seq_len included
  bool kv_head_modulo = false;   // query head h reads KV head h % Hkv instead of h / G
  bool lse_base2 = false;        // lse as log2(sum of exp)
  double scale_power = 1.0;      // 2: the scale applied twice
};

struct DecodePagedGqa : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/decode_paged_gqa"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/decode_paged_gqa");

  static Scalars scalars_of(const Workload& w, double scale) {
    Scalars scalars;
    scalars.axes = w.axes;
    scalars.values["softmax_scale"] = scale;
    return scalars;
  }
  // A workload with these lengths (B, Lmin, Lmax) and heads; N, P, NB (P and 9 spare pages), MB follow.
  Workload workload(int64_t count, int64_t shortest, int64_t longest, int64_t heads, int64_t kv_heads, int64_t dim = 128) const {
    Workload w = *task.find_workload("llama3-8b-B3-ctx1-37");
    int64_t tokens = 0, pages = 0;
    for (int64_t b = 0; b < count; ++b) {
      const int64_t length = count == 1 ? shortest : shortest + b * (longest - shortest) / (count - 1);
      tokens += length, pages += (length + 15) / 16;
    }
    w.axes = {{"B", count}, {"Lmin", shortest}, {"Lmax", longest}, {"N", tokens},    {"P", pages},
              {"NB", pages + 9}, {"MB", (longest + 15) / 16 + 2}, {"Hq", heads}, {"Hkv", kv_heads}, {"D", dim}};
    return w;
  }
  // The reference on these inputs, natively or in float64 (the oracle).
  TensorMap run(const TensorMap& inputs, const Scalars& scalars, bool wide) const {
    TensorMap copy;
    for (const auto& [name, tensor] : inputs)
      copy[name] = wide && at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kDouble) : tensor;
    return code->reference(copy, scalars);
  }

  // One part of a context: fp32 scores of the bf16 inputs, the maximum, p = exp(s - max) in fp32 (rounded to
  // bf16 for p v where the kernel rounds it), the sum, o = (p v) / sum, lse = max + log(sum).
  static std::pair<at::Tensor, double> attend(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                                              float factor, const Candidate& how) {
    const at::Tensor s = at::matmul(keys, query).mul(factor);
    const double max = s.max().item<double>();
    const at::Tensor p = at::exp(s - max), rounded = p.to(at::kBFloat16).to(at::kFloat);
    const at::Tensor sum = (how.sum_rounded_p ? rounded : p).sum();
    const at::Tensor o = at::matmul(how.round_p ? rounded : p, values) / sum;
    return {o, max + std::log(sum.item<double>())};
  }

  // A kernel's arithmetic, written out per sequence and query head.
  static TensorMap candidate(const TensorMap& inputs, double scale, const Candidate& how) {
    const at::Tensor q = inputs.at("q").to(at::kFloat);
    const at::Tensor k_cache = inputs.at("k_cache").to(at::kFloat), v_cache = inputs.at("v_cache").to(at::kFloat);
    const at::Tensor table = inputs.at("block_table").to(at::kLong), lengths = inputs.at("seq_lens").to(at::kLong);
    const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(2), kv_heads = k_cache.size(2), blocks = k_cache.size(0);
    at::Tensor o = at::empty({batch, heads, dim}, at::TensorOptions().dtype(at::kBFloat16));
    at::Tensor lse = at::empty({heads, batch}, at::TensorOptions().dtype(at::kFloat));
    const float factor = static_cast<float>(std::pow(scale, how.scale_power));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t length = lengths[b].item<int64_t>(), pages = (length + 15) / 16;
      const at::Tensor ids = how.pages_contiguous ? at::remainder(at::arange(pages, at::kLong) + table[b][0], blocks)
                                                  : table[b].narrow(0, 0, pages);
      const int64_t read = how.past_seq_len ? pages * 16 : length;
      const at::Tensor k = k_cache.index_select(0, ids).view({-1, kv_heads, dim}).narrow(0, 0, read);
      const at::Tensor v = v_cache.index_select(0, ids).view({-1, kv_heads, dim}).narrow(0, 0, read);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kv = how.kv_head_modulo ? h % kv_heads : h / (heads / kv_heads);
        const at::Tensor keys = k.select(1, kv), values = v.select(1, kv);
        at::Tensor out;
        double row_lse = 0.0;
        if (how.split > 0) {
          // Each part's normalized output and LSE, merged in fp32: weights exp(lse_s - max) / their sum.
          std::vector<std::pair<at::Tensor, double>> parts;
          for (int64_t first = 0; first < read; first += how.split) {
            const int64_t n = std::min(how.split, read - first);
            parts.push_back(attend(q[b][h], keys.narrow(0, first, n), values.narrow(0, first, n), factor, how));
          }
          double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
          for (const auto& part : parts) max = std::max(max, part.second);
          out = at::zeros({dim}, at::TensorOptions().dtype(at::kFloat));
          for (const auto& part : parts) sum += std::exp(part.second - max);
          for (const auto& part : parts) out += part.first * static_cast<float>(std::exp(part.second - max) / sum);
          row_lse = max + std::log(sum);
        } else {
          std::tie(out, row_lse) = attend(q[b][h], keys, values, factor, how);
        }
        o[b][h].copy_(out);
        lse[h][b] = how.lse_base2 ? row_lse / std::numbers::ln2 : row_lse;
      }
    }
    return {{"o", o}, {"lse", lse}};
  }
};

TEST_F(DecodePagedGqa, AHandComputedBatchShowsThePagesTheGroupsAndTheNaturalLogLse) {
  // 4 pages of 16 tokens, 2 KV heads, D = 2, scale 0.5; every query head asks (1, 0). Every cache row starts
  // as another sequence's: key (3, 0) (score 1.5) and value (100, -100), which no result below contains.
  // Sequence 0, 18 tokens: logical page 0 is physical page 3, page 1 is physical page 1 (rows 0 and 1 only;
  // rows 2..15 are past seq_len). KV head 0: token 17's key (2 ln 17, 0) (score ln 17), the other 17 keys 0;
  // values (1, 0) except token 17's (0, 2). KV head 1: keys 0, value (t, 0).
  // Sequence 1, 1 token on physical page 2, row 0: KV head 0 key (4, 0), value (7, 8); KV head 1 key (-2, 0),
  // value (9, 10). Table rows [3, 1, 0] and [2, 0, 3]: their unused entries name pages that hold other data.
  const double ln17 = std::log(17.0);
  at::Tensor k_cache = at::zeros({4, 16, 2, 2}, kF64), v_cache = at::zeros({4, 16, 2, 2}, kF64);
  k_cache.select(3, 0).fill_(3.0);
  v_cache.select(3, 0).fill_(100.0), v_cache.select(3, 1).fill_(-100.0);
  const auto slot = [&](int64_t t) { return std::pair<int64_t, int64_t>{t < 16 ? 3 : 1, t % 16}; };
  for (int64_t t = 0; t < 18; ++t) {
    const auto [page, row] = slot(t);
    k_cache[page][row].zero_();
    v_cache[page][row][0] = at::tensor({1.0, 0.0}, kF64);
    v_cache[page][row][1] = at::tensor({static_cast<double>(t), 0.0}, kF64);
  }
  k_cache[1][1][0][0] = 2 * ln17;  // token 17, KV head 0: score 0.5 * 2 ln 17 = ln 17, weight 17 beside 17 ones
  v_cache[1][1][0] = at::tensor({0.0, 2.0}, kF64);
  k_cache[2][0] = at::tensor({4.0, 0.0, -2.0, 0.0}, kF64).view({2, 2});
  v_cache[2][0] = at::tensor({7.0, 8.0, 9.0, 10.0}, kF64).view({2, 2});
  const at::Tensor q = at::tensor({1.0, 0.0}, kF64).repeat({2, 4, 1});
  Scalars scalars;
  scalars.values["softmax_scale"] = 0.5;
  TensorMap inputs{{"q", q}, {"k_cache", k_cache}, {"v_cache", v_cache},
                   {"block_table", at::tensor({3, 1, 0, 2, 0, 3}, kI32).view({2, 3})}, {"seq_lens", at::tensor({18, 1}, kI32)}};
  const TensorMap out = code->reference(inputs, scalars);
  const at::Tensor o = out.at("o"), lse = out.at("lse");
  ASSERT_EQ(o.sizes(), (std::vector<int64_t>{2, 4, 2}));
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{4, 2})) << "[Hq, B]: head-major";
  const auto expect = [](const at::Tensor& got, std::vector<double> want, const char* what) {
    EXPECT_TRUE(at::allclose(got.flatten(), at::tensor(want, kF64), 1e-12, 1e-12)) << what << ": " << got;
  };
  // KV head 0: weights 1/34 for 17 keys, 1/2 for token 17: o = (17/34, 1); KV head 1: o = mean of 0..17.
  expect(o[0], {0.5, 1.0, 0.5, 1.0, 8.5, 0.0, 8.5, 0.0}, "sequence 0: its two pages in table order, cut at 18 (heads 2, 3 read KV head 1)");
  expect(lse.select(1, 0), {std::log(34.0), std::log(34.0), std::log(18.0), std::log(18.0)}, "sequence 0's lse, natural log");
  expect(o[1], {7, 8, 7, 8, 9, 10, 9, 10}, "a one-token context: o = v");
  expect(lse.select(1, 1), {2, 2, -1, -1}, "its lse is its one score, 0.5 * q.k");
}

TEST_F(DecodePagedGqa, TorchsFlashKernelAgreesOnOAndOnTheLsesBaseAndLayout) {
  // The library path on the cpu (torch's flash kernel on the gathered K/V, natural-log LSE [1, H, 1] per
  // sequence) against the float64 oracle: the same o and lse within the tolerance.
  const Workload w = workload(3, 1, 300, 8, 2);
  const Scalars scalars = scalars_of(w, 1.0 / std::sqrt(128.0));
  TensorMap inputs = make_inputs(task, *code, w, 5);
  const TensorMap want = run(inputs, scalars, true);
  const auto verdict = check(task, *code, scalars, code->library(inputs, scalars), want, {});
  for (const auto& c : verdict.comparisons)
    std::cout << "torch's cpu flash kernel: " << c.name << " nmse " << c.nmse << ", worst element " << c.worst_excess << " of its bound\n";
  EXPECT_EQ(verdict.status, Status::passed) << verdict.message;
}

TEST_F(DecodePagedGqa, MakeInputsScattersDistinctPagesAndGivesTheWorkloadsLengths) {
  for (const auto& w : task.workloads) {
    // One head of dim 1 (the structure is what this checks, not the draw of the values).
    Workload small = w;
    small.axes["Hq"] = small.axes["Hkv"] = small.axes["D"] = 1;
    const TensorMap inputs = make_inputs(task, *code, small, 3);
    const at::Tensor lengths = inputs.at("seq_lens").to(at::kLong), table = inputs.at("block_table").to(at::kLong);
    ASSERT_EQ(lengths.numel(), w.axes.at("B")) << w.name;
    ASSERT_EQ(table.sizes(), (std::vector<int64_t>{w.axes.at("B"), w.axes.at("MB")})) << w.name;
    EXPECT_EQ(inputs.at("k_cache").size(0), w.axes.at("NB")) << w.name;
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
      for (int64_t j = 0; j < (length[b] + 15) / 16; ++j) {
        used.insert(entry[b][j]);
        if (j > 0 && entry[b][j] != entry[b][j - 1] + 1) scattered = true;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(used.size()), w.axes.at("P")) << w.name << ": a page shared by two sequences";
    if (w.axes.at("P") > w.axes.at("B")) EXPECT_TRUE(scattered) << w.name;
  }
  // The order is random: the mixed batch is neither sorted nor the same for two seeds.
  Workload mixed = *task.find_workload("llama3-8b-B256-ctx128-2048-mixed");
  mixed.axes["Hq"] = mixed.axes["Hkv"] = mixed.axes["D"] = 1;
  const at::Tensor a = make_inputs(task, *code, mixed, 3).at("seq_lens"), b = make_inputs(task, *code, mixed, 4).at("seq_lens");
  EXPECT_TRUE(at::equal(a, make_inputs(task, *code, mixed, 3).at("seq_lens"))) << "deterministic in the seed";
  EXPECT_FALSE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, std::get<0>(a.sort()))) << "not sorted";
  // A workload whose N disagrees with its lengths is refused, naming the axis.
  Workload wrong = mixed;
  wrong.axes["N"] += 1;
  try {
    make_inputs(task, *code, wrong, 3);
    ADD_FAILURE() << "a wrong N was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("N = 278409"), std::string::npos) << e.what();
  }
}

struct Variant {
  const char* label;
  Candidate how;
  bool o_passes, lse_passes;
};

TEST_F(DecodePagedGqa, TheToleranceAcceptsAFlashDecodingKernelAndRejectsTheHurriedMistakes) {
  // 7 sequences of 1 to 700 tokens (most ending mid-page), 8 query heads over 2 KV heads, the published
  // normal inputs and the hidden workload's heavy-tailed keys.
  for (const bool heavy_tail : {false, true}) {
    Workload w = workload(7, 1, 700, 8, 2);
    if (heavy_tail) w.inits["k_cache"] = InputInit{.dist = "student_t", .std = 1.0, .df = 3.0};
    const double scale = 1.0 / std::sqrt(128.0);
    const Scalars scalars = scalars_of(w, scale);
    const TensorMap inputs = make_inputs(task, *code, w, heavy_tail ? 17 : 13);
    const TensorMap want = run(inputs, scalars, true);
    const std::vector<Variant> variants = {
        {"FlashDecoding (bf16 p)", {}, true, true},
        {"fp32 p", {.round_p = false}, true, true},
        {"split-KV in parts of 64 keys, merged by LSE", {.split = 64}, true, true},
        {"the sum over the bf16 p", {.sum_rounded_p = true}, true, false},
        {"pages read as if contiguous", {.pages_contiguous = true}, false, false},
        {"the last page read past seq_len", {.past_seq_len = true}, false, false},
        {"KV head h % Hkv", {.kv_head_modulo = true}, false, false},
        {"lse in base 2", {.lse_base2 = true}, true, false},
        {"the scale applied twice", {.scale_power = 2.0}, false, false},
    };
    for (const auto& variant : variants) {
      expect_o_and_lse(std::string(heavy_tail ? "heavy-tailed k, " : "normal, ") + variant.label,
                       check(task, *code, scalars, candidate(inputs, scale, variant.how), want, {}), variant.o_passes,
                       variant.lse_passes);
    }
    // The eager baseline (bf16 scores, scaled in bf16) is timed, not held to the tolerance.
    const auto eager = check(task, *code, scalars, run(inputs, scalars, false), want, {});
    print_verdict(std::string(heavy_tail ? "heavy-tailed k, " : "normal, ") + "eager (bf16 scores)", eager);
    EXPECT_EQ(eager.status, Status::incorrect_numerics);
  }
}

}  // namespace
}  // namespace d2k
