// attn/decode_paged_gqa on the GPU: the library path (the K/V rows gathered, then torch's FlashAttention-2
// varlen forward) agrees with the float64 oracle on o and on the LSE's layout [Hq, B] and base, on every
// published workload; and each fused backend torch 2.11 offers is timed on every published workload (cold
// L2, d2k's timer), with and without the gather, so that the library column of task.toml is the fastest of
// them. The times are printed, not asserted.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>

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

struct DecodePagedGqaGpu : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/decode_paged_gqa"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/decode_paged_gqa");
};

using Backend = std::function<void()>;

TEST_F(DecodePagedGqaGpu, TheLibraryPathMatchesTheOracleAndEachBackendIsTimed) {
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
    wide.clear();
    TensorMap got = call_library(task, *code, native, scalars);
    for (auto& [name, tensor] : got) tensor = tensor.cpu();
    TensorMap want_cpu;
    for (const auto& [name, tensor] : want) want_cpu[name] = tensor.cpu();
    const auto verdict = check(task, *code, scalars, got, want_cpu, {});
    for (const auto& c : verdict.comparisons)
      std::cout << w.name << ": gather + FlashAttention-2 varlen " << c.name << " nmse " << c.nmse << ", worst " << c.worst_excess << " of its bound\n";
    EXPECT_EQ(verdict.status, Status::passed) << w.name << ": " << verdict.message;

    // The gathered K and V [N, Hkv, D] and their offsets, made once, for the backends timed without the gather.
    const at::Tensor& q = native.at("q");
    const at::Tensor lengths = native.at("seq_lens").cpu().to(at::kLong);
    const at::Tensor table = native.at("block_table").cpu().to(at::kLong);
    const int64_t batch = q.size(0), kv_heads = native.at("k_cache").size(2), dim = q.size(2);
    std::vector<at::Tensor> slots;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t length = lengths[b].item<int64_t>();
      const at::Tensor position = at::arange(length, at::kLong);
      slots.push_back(table[b].index_select(0, at::floor_divide(position, 16)) * 16 + at::remainder(position, 16));
    }
    const at::Tensor slot = at::cat(slots).to(q.device());
    const at::Tensor k = native.at("k_cache").view({-1, kv_heads, dim}).index_select(0, slot);
    const at::Tensor v = native.at("v_cache").view({-1, kv_heads, dim}).index_select(0, slot);
    const at::Tensor cu_k = at::cat({at::zeros({1}, at::kLong), lengths.cumsum(0)}).to(at::kInt).to(q.device());
    const at::Tensor cu_q = at::arange(batch + 1, at::TensorOptions().dtype(at::kInt).device(q.device()));
    const int64_t longest = lengths.max().item<int64_t>();
    // One sequence's [1, H, L, D] view of the gathered rows.
    const auto per_head = [&](const at::Tensor& x, int64_t b) {
      const int64_t start = cu_k[b].item<int64_t>(), length = lengths[b].item<int64_t>();
      return x.narrow(0, start, length).transpose(0, 1).unsqueeze(0);
    };
    const std::vector<std::pair<std::string, Backend>> backends = {
        {"eager reference", [&] { TensorMap copy = native; code->reference(copy, scalars); }},
        {"gather + FlashAttention-2 varlen (the library path)", [&] { TensorMap copy = native; code->library(copy, scalars); }},
        {"FlashAttention-2 varlen on pre-gathered K/V (no gather)", [&] {
           at::_flash_attention_forward(q, k, v, cu_q, cu_k, 1, longest, 0.0, false, false, scale);
         }},
        {"SDPA per sequence on pre-gathered K/V, enable_gqa (torch's choice, no lse)", [&] {
           for (int64_t b = 0; b < batch; ++b)
             at::scaled_dot_product_attention(q[b].unsqueeze(1).unsqueeze(0), per_head(k, b), per_head(v, b), {}, 0.0, false, scale, true);
         }},
    };
    for (const auto& [label, backend] : backends) {
      try {
        const auto summary = summarize(measure(Device::cuda, backend, nullptr, timing));
        const double bytes = 4.0 * w.axes.at("N") * w.axes.at("Hkv") * w.axes.at("D");
        std::cout << w.name << ": " << label << ": " << summary.median_ms * 1e3 << " us, " << bytes / (summary.median_ms * 1e6)
                  << " GB/s of K/V\n";
      } catch (const std::exception& e) {
        std::cout << w.name << ": " << label << ": not available (" << std::string(e.what()).substr(0, 200) << ")\n";
      }
    }
  }
}

}  // namespace
}  // namespace d2k
