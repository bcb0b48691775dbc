// attn/decode_mla on the GPU: the library path (the latent rows gathered, then torch's memory-efficient
// attention in its varlen form with K 576 and V 512 wide) agrees with the float64 oracle on o and on the LSE's
// layout [B, H] and base, on every published workload; and each fused backend torch offers for Dk != Dv is
// timed on every published workload (cold L2, d2k's timer), so that the library column of task.toml is the
// fastest of them. The times are printed, not asserted; a backend that refuses the shape says so.
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

struct DecodeMlaGpu : ::testing::Test {
  Task task = load_task(kTasks, std::string("attn/decode_mla"));
  std::unique_ptr<TaskCode> code = make_task_code("attn/decode_mla");
};

using Backend = std::function<void()>;

TEST_F(DecodeMlaGpu, TheLibraryPathMatchesTheOracleAndEachBackendIsTimed) {
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
    TensorMap want_cpu;
    for (const auto& [name, tensor] : want) want_cpu[name] = tensor.cpu();
    try {
      TensorMap got = call_library(task, *code, native, scalars);
      for (auto& [name, tensor] : got) tensor = tensor.cpu();
      const auto verdict = check(task, *code, scalars, got, want_cpu, {});
      for (const auto& c : verdict.comparisons)
        std::cout << w.name << ": gather + memory-efficient varlen " << c.name << " nmse " << c.nmse << ", worst " << c.worst_excess
                  << " of its bound\n";
      EXPECT_EQ(verdict.status, Status::passed) << w.name << ": " << verdict.message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << w.name << ": the library path failed: " << std::string(e.what()).substr(0, 400);
    }

    // The gathered rows [N, 576] and their offsets, made once, for the backends timed without the gather.
    const at::Tensor& q = native.at("q");
    const at::Tensor lengths = native.at("seq_lens").cpu().to(at::kLong);
    const at::Tensor table = native.at("block_table").cpu().to(at::kLong);
    const int64_t batch = q.size(0), heads = q.size(1);
    std::vector<at::Tensor> slots;
    for (int64_t b = 0; b < batch; ++b) {
      const at::Tensor position = at::arange(lengths[b].item<int64_t>(), at::kLong);
      slots.push_back(table[b].index_select(0, at::floor_divide(position, 64)) * 64 + at::remainder(position, 64));
    }
    const at::Tensor slot = at::cat(slots).to(q.device());
    const at::Tensor kv = native.at("kv_cache").view({-1, 576}).index_select(0, slot);
    const int64_t tokens = kv.size(0);
    const at::Tensor cu_k = at::cat({at::zeros({1}, at::kLong), lengths.cumsum(0)}).to(at::kInt).to(q.device());
    const at::Tensor cu_q = at::arange(batch + 1, at::TensorOptions().dtype(at::kInt).device(q.device()));
    const int64_t longest = lengths.max().item<int64_t>();
    const at::Tensor keys = kv.unsqueeze(1).expand({tokens, heads, 576}).unsqueeze(0);
    const at::Tensor values = kv.narrow(1, 0, 512).unsqueeze(1).expand({tokens, heads, 512}).unsqueeze(0);
    // One sequence's [1, H, L, D] views (the latent head broadcast over the query heads).
    const auto per_head = [&](const at::Tensor& x, int64_t b) {
      const int64_t start = cu_k[b].item<int64_t>(), length = lengths[b].item<int64_t>();
      return x.narrow(0, start, length).unsqueeze(0).unsqueeze(0).expand({1, heads, length, x.size(1)});
    };
    const at::Tensor kv512 = kv.narrow(1, 0, 512);
    const std::vector<std::pair<std::string, Backend>> backends = {
        {"eager reference", [&] { TensorMap copy = native; code->reference(copy, scalars); }},
        {"gather + memory-efficient varlen (the library path)", [&] { TensorMap copy = native; code->library(copy, scalars); }},
        {"memory-efficient varlen on pre-gathered rows (no gather)", [&] {
           at::_efficient_attention_forward(q.unsqueeze(0), keys, values, std::nullopt, cu_q, cu_k, 1, longest, 0.0, 0, true, scale);
         }},
        {"SDPA per sequence on pre-gathered rows, Dk 576 Dv 512 (torch's choice, no lse)", [&] {
           for (int64_t b = 0; b < batch; ++b)
             at::scaled_dot_product_attention(q[b].unsqueeze(0).unsqueeze(2), per_head(kv, b), per_head(kv512, b), {}, 0.0, false, scale);
         }},
        {"SDPA per sequence, V the whole 576-wide row (Dk = Dv: the flash backends may take it)", [&] {
           for (int64_t b = 0; b < batch; ++b)
             at::scaled_dot_product_attention(q[b].unsqueeze(0).unsqueeze(2), per_head(kv, b), per_head(kv, b), {}, 0.0, false, scale);
         }},
    };
    for (const auto& [label, backend] : backends) {
      try {
        const auto summary = summarize(measure(Device::cuda, backend, nullptr, timing));
        const double bytes = 2.0 * 576 * w.axes.at("N");
        const double flops = 2.0 * (576 + 512) * w.axes.at("H") * w.axes.at("N");
        std::cout << w.name << ": " << label << ": " << summary.median_ms * 1e3 << " us, " << bytes / (summary.median_ms * 1e6)
                  << " GB/s of latent rows, " << flops / (summary.median_ms * 1e9) << " TFLOP/s\n";
      } catch (const std::exception& e) {
        std::cout << w.name << ": " << label << ": not available (" << std::string(e.what()).substr(0, 200) << ")\n";
      }
    }
  }
}

}  // namespace
}  // namespace d2k
