// attn/prefill_causal_gqa on the GPU: the library path (cuDNN's attention per sequence, GQA native) agrees
// with the float64 oracle on o and on the LSE's layout [Hq, T] and base, on every published workload; and each
// fused backend torch 2.11 offers is timed on every published workload (cold L2, d2k's timer), so that the
// library column of task.toml is the fastest of them. The times are printed, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <optional>

#include "core/task_loader.hpp"
#include "reference/check.hpp"
#include "reference/inputs.hpp"
#include "reference/oracle.hpp"
#include "reference/torch_device.hpp"
#include "timing/stats.hpp"
#include "timing/timer.hpp"

namespace d2k {
namespace {

const std::filesystem::path kTasks = std::filesystem::path(D2K_ROOT_DIR) / "tasks";

struct PrefillCausalGqaGpu : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/prefill_causal_gqa"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/prefill_causal_gqa");
};

// Each sequence's [start, end).
std::vector<std::pair<int64_t, int64_t>> spans_of(const at::Tensor& cu_seqlens) {
  const at::Tensor offsets = cu_seqlens.to(at::kCPU, at::kLong);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t b = 0; b + 1 < offsets.numel(); ++b) spans.emplace_back(offsets[b].item<int64_t>(), offsets[b + 1].item<int64_t>());
  return spans;
}

// [1, H, L, D] of one sequence, and the same with each KV head repeated for its group (backends without GQA).
at::Tensor per_head(const at::Tensor& x, int64_t start, int64_t length) {
  return x.narrow(0, start, length).transpose(0, 1).unsqueeze(0);
}

using Backend = std::function<void(const TensorMap&)>;

TEST_F(PrefillCausalGqaGpu, TheLibraryPathMatchesTheOracleAndEachBackendIsTimed) {
  require_torch_device(Device::cuda);  // loads libtorch_cuda: nothing links it at build time
  TimingConfig timing;
  timing.min_samples = 10;
  timing.max_seconds = 0.5;
  for (const auto& w : task.workloads) {
    if (w.hidden || w.smoke) continue;
    const Scalars scalars = scalars_for(task, w);
    const double scale = scalars.f("softmax_scale");
    const TensorMap inputs = make_inputs(task, *code, w, 1);
    TensorMap native = place_inputs(inputs, Device::cuda, Precision::native);
    TensorMap wide = place_inputs(inputs, Device::cuda, Precision::oracle);
    const TensorMap want = call_reference(task, *code, wide, scalars);
    TensorMap got = call_library(task, *code, native, scalars);
    for (auto& [name, tensor] : got) tensor = tensor.cpu();
    TensorMap want_cpu;
    for (const auto& [name, tensor] : want) want_cpu[name] = tensor.cpu();
    const auto verdict = check(task, *code, scalars, got, want_cpu, {});
    for (const auto& c : verdict.comparisons)
      std::cout << w.name << ": library path " << c.name << " nmse " << c.nmse << ", worst " << c.worst_excess << " of its bound\n";
    EXPECT_EQ(verdict.status, Status::passed) << w.name << ": " << verdict.message;

    const at::Tensor& q = native.at("q");
    const at::Tensor& k = native.at("k");
    const at::Tensor& v = native.at("v");
    const int64_t group = q.size(1) / k.size(1);
    const auto spans = spans_of(native.at("cu_seqlens"));
    const auto per_sequence = [&](const std::function<void(int64_t, int64_t)>& body) {
      for (const auto& [start, end] : spans) body(start, end - start);
    };
    const std::vector<std::pair<std::string, Backend>> backends = {
        {"eager reference", [&](const TensorMap&) { TensorMap copy = native; code->reference(copy, scalars); }},
        {"cuDNN per sequence, GQA native, with the LSE (the library path)", [&](const TensorMap&) { TensorMap copy = native; code->library(copy, scalars); }},
        {"FlashAttention-2 varlen (_flash_attention_forward)", [&](const TensorMap&) {
           int64_t longest = 0;
           for (const auto& [start, end] : spans) longest = std::max(longest, end - start);
           at::_flash_attention_forward(q, k, v, native.at("cu_seqlens"), native.at("cu_seqlens"), longest, longest, 0.0, true, false, scale);
         }},
        {"SDPA per sequence, enable_gqa (torch's choice, no lse)", [&](const TensorMap&) {
           per_sequence([&](int64_t s, int64_t l) {
             at::scaled_dot_product_attention(per_head(q, s, l), per_head(k, s, l), per_head(v, s, l), {}, 0.0, true, scale, true);
           });
         }},
        {"flash per sequence (_scaled_dot_product_flash_attention)", [&](const TensorMap&) {
           per_sequence([&](int64_t s, int64_t l) {
             at::_scaled_dot_product_flash_attention(per_head(q, s, l), per_head(k, s, l), per_head(v, s, l), 0.0, true, false, scale);
           });
         }},
        {"cuDNN per sequence, K and V repeated", [&](const TensorMap&) {
           per_sequence([&](int64_t s, int64_t l) {
             at::_scaled_dot_product_cudnn_attention(per_head(q, s, l), per_head(k, s, l).repeat_interleave(group, 1),
                                                     per_head(v, s, l).repeat_interleave(group, 1), {}, true, 0.0, true, false, scale);
           });
         }},
        {"memory-efficient per sequence, K and V repeated", [&](const TensorMap&) {
           per_sequence([&](int64_t s, int64_t l) {
             at::_scaled_dot_product_efficient_attention(per_head(q, s, l), per_head(k, s, l).repeat_interleave(group, 1),
                                                         per_head(v, s, l).repeat_interleave(group, 1), {}, true, 0.0, true, scale);
           });
         }},
    };
    for (const auto& [label, backend] : backends) {
      try {
        const auto summary = summarize(measure(Device::cuda, [&] { backend(native); }, nullptr, timing));
        const double tflops = 4.0 * w.axes.at("Hq") * w.axes.at("D") * w.axes.at("P") / (summary.median_ms * 1e9);
        std::cout << w.name << ": " << label << ": " << summary.median_ms * 1e3 << " us, " << tflops << " TFLOP/s\n";
      } catch (const std::exception& e) {
        std::cout << w.name << ": " << label << ": not available (" << std::string(e.what()).substr(0, 200) << ")\n";
      }
    }
  }
}

}  // namespace
}  // namespace d2k
