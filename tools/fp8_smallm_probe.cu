// Where quant/fp8_block_gemm's small-M weight stream (solution/cuda/smallm_kernel.cuh, 1 <= M <= 64) spends
// its time: the shipped kernel timed alone with CUDA events over a sweep of weight shapes, each with a cold
// L2 (a 256 MiB write between calls, as the harness flushes) and with a warm one (the same call again: a
// weight under the 50 MB L2 is then read from it), beside an empty kernel of the same shape (132 CTAs of
// 384 threads, the same dynamic shared memory; cooperative and plain), the host's own time in run() (two
// tensor-map encodes and the launch), and the plainest kernel that reads the same weight once (cold and
// warm): what any weight stream pays after the flush. Then one more cold call per shape with the kernel's
// timestamps on (FP8_SMALLM_STAMP below: each CTA's entry, first and last loads, stream end, staging,
// cluster exchange, reduction and exit), summarized per event, and with a second argument written per CTA
// to a CSV: where the time between the launch and the last store goes.
//
// What it found (tasks/quant/fp8_block_gemm/notes.md, 2026-12-04): a warm L2 left the first form of the
// kernel as slow as a cold one, and its stamps put about 5.5 us of qkv_a M64's 19.5 after the stream, in the
// split-K reduction through global memory; the cluster form that replaced it keeps that reduction in the
// cluster's shared memory.
//
// Built only on request (`cmake --build build --target d2k-fp8-smallm-probe`; scripts/gpu-pack packs it):
// it needs the CUTLASS headers that setup installs and an sm_90a GPU to run.
//   .gpu/d2k-fp8-smallm-probe [calls per shape, default 30] [CSV of every CTA's stamps]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// The kernel's own timestamps (smallm_kernel.cuh's Stamp events) in one traced call per shape: the global
// timer (ns, one clock for every SM) and the SM's cycle counter, per CTA.
constexpr int kMaxTracedCtas = 1024, kMaxStamps = 16;
__device__ unsigned long long g_stamps[kMaxTracedCtas][kMaxStamps][2];
__device__ __forceinline__ void probe_stamp(int event) {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  g_stamps[blockIdx.x][event][0] = ns;
  g_stamps[blockIdx.x][event][1] = clock64();
}
#define FP8_SMALLM_STAMP(event) probe_stamp(event)

#include "smallm_kernel.cuh"

namespace {

namespace sm = fp8_block_gemm::smallm;

void check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "fp8_smallm_probe: %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

// Random e4m3 bytes, never NaN (0x7F, 0xFF), from a hash of the index: the tensor cores' time does not
// depend on the values, but a NaN would make the output meaningless to anyone who looks.
__global__ void fill_fp8(uint8_t* data, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B9u ^ salt;
    x ^= x >> 16, x *= 0x85EBCA6Bu, x ^= x >> 13;
    uint8_t v = static_cast<uint8_t>(x);
    if ((v & 0x7F) == 0x7F) v ^= 1;
    data[i] = v;
  }
}

__global__ void fill_scales(float* data, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    data[i] = 0.01f + 0.001f * static_cast<float>(i % 97);
}

// The plainest weight stream: every 16 bytes of `data` loaded once (4 loads in flight per thread), summed
// into one word so that nothing is optimized away. Its cold time is what reading the weight costs any
// kernel after the harness's flush, before a single MMA.
__global__ void __launch_bounds__(512) read_kernel(const uint4* data, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = data[i], b = data[i + stride], c = data[i + 2 * stride], d = data[i + 3 * stride];
    acc ^= a.x ^ a.w ^ b.y ^ b.z ^ c.x ^ c.w ^ d.y ^ d.z;
  }
  for (; i < n; i += stride) acc ^= data[i].x;
  if (acc == 0x9E3779B9u) *sink = acc;  // practically never: keeps the loads
}

// The empty kernel of the same launch shape: what a cooperative launch of 132 CTAs of 384 threads with
// this much shared memory costs before any work.
__global__ void __launch_bounds__(sm::kThreads, 1) empty_kernel(uint32_t* sink) {
  if (sink != nullptr && threadIdx.x == 0 && blockIdx.x == 0) *sink = 1;
}

static_assert(sm::kStampCount <= kMaxStamps);
constexpr const char* kStampNames[] = {"entry",      "init",       "first issue",   "last issue", "first full",
                                       "stream end", "staged",     "cluster ready", "reduced",    "exit"};
static_assert(sizeof(kStampNames) / sizeof(kStampNames[0]) == sm::kStampCount);

struct Shape {
  const char* name;
  int m, n, k;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  // The four M 64 workloads of task.toml, the hidden M 5, then a sweep of N at the two K's.
  std::vector<Shape> shapes = {{"qkv_a M64", 64, 2112, 7168},         {"q_b M64", 64, 24576, 1536},
                               {"o_proj M64", 64, 7168, 16384},       {"shared_gate_up M64", 64, 4096, 7168},
                               {"q_b M5", 5, 24576, 1536}};
  for (int n : {1024, 4096, 8192, 16384, 32768, 49152}) shapes.push_back({"sweep K1536 M64", 64, n, 1536});
  for (int n : {256, 512, 1024, 4096, 8192}) shapes.push_back({"sweep K7168 M64", 64, n, 7168});

  const int64_t flush_bytes = int64_t{256} << 20;
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "flush buffer");
  uint32_t* sink = nullptr;
  check(cudaMalloc(&sink, sizeof(uint32_t)), "sink");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  cudaEvent_t start, stop, start2, stop2;
  for (cudaEvent_t* e : {&start, &stop, &start2, &stop2}) check(cudaEventCreate(e), "event");
  const auto elapsed_us = [](cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    check(cudaEventSynchronize(to), "sync");
    check(cudaEventElapsedTime(&ms, from, to), "elapsed");
    return 1000.0 * ms;
  };
  // `calls` times: the 256 MiB write, then `launch` timed cold and, right behind it, warm. Both calls are
  // enqueued before either is read, so neither waits for the host (the write keeps the GPU busy meanwhile).
  struct ColdWarm {
    double cold, warm;  // medians, us
  };
  const auto cold_and_warm = [&](const auto& launch) {
    std::vector<double> cold, warm;
    for (int i = 0; i < calls; ++i) {
      check(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, stream), "flush");
      check(cudaEventRecord(start, stream), "record");
      launch();
      check(cudaEventRecord(stop, stream), "record");
      check(cudaEventRecord(start2, stream), "record");
      launch();
      check(cudaEventRecord(stop2, stream), "record");
      cold.push_back(elapsed_us(start, stop));
      warm.push_back(elapsed_us(start2, stop2));
    }
    return ColdWarm{median(cold), median(warm)};
  };

  // The empty kernel at the M 64 configuration's shared memory, launched cooperatively and plainly.
  {
    constexpr int kBytes = sm::kernel_shared_bytes<64>;
    check(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes), "attribute");
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(prop.multiProcessorCount));
    config.blockDim = dim3(sm::kThreads);
    config.dynamicSmemBytes = kBytes;
    config.stream = stream;
    config.attrs = &attribute;
    const auto launch = [&] { check(cudaLaunchKernelEx(&config, empty_kernel, sink), "empty launch"); };
    config.numAttrs = 1;
    const ColdWarm cooperative = cold_and_warm(launch);
    config.numAttrs = 0;
    const ColdWarm plain = cold_and_warm(launch);
    std::printf("empty kernel, %d x %d threads, %d B shared, cold / warm: cooperative %.2f / %.2f us, plain %.2f / "
                "%.2f us (medians of %d)\n",
                prop.multiProcessorCount, sm::kThreads, kBytes, cooperative.cold, cooperative.warm, plain.cold,
                plain.warm, calls);
  }

  // One cold call with the stamps on: per event, the median and the latest CTA, in us since the earliest
  // CTA's entry, and the call's event time beside them (the launch before the first CTA is the difference).
  // With a second argument, every CTA's stamps also go to that CSV file (shape, cta, then one column per event).
  FILE* csv = argc > 2 ? std::fopen(argv[2], "w") : nullptr;
  if (csv != nullptr) {
    std::fprintf(csv, "shape,m,n,k,cta");
    for (const char* event : kStampNames) std::fprintf(csv, ",%s", event);
    std::fprintf(csv, "\n");
  }
  void* stamps = nullptr;
  check(cudaGetSymbolAddress(&stamps, g_stamps), "stamps");
  const auto trace = [&](const Shape& shape, const auto& launch) {
    std::vector<unsigned long long> host(kMaxTracedCtas * kMaxStamps * 2);
    check(cudaMemsetAsync(stamps, 0, host.size() * sizeof(unsigned long long), stream), "stamps clear");
    check(cudaMemsetAsync(flush, 0x5A, flush_bytes, stream), "flush");
    check(cudaEventRecord(start, stream), "record");
    launch();
    check(cudaEventRecord(stop, stream), "record");
    const double call = elapsed_us(start, stop);
    check(cudaMemcpy(host.data(), stamps, host.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost), "stamps");
    const auto at = [&](int cta, int event, int which) { return host[(size_t(cta) * kMaxStamps + event) * 2 + which]; };
    int ctas = 0;
    unsigned long long origin = ~0ull;
    for (int cta = 0; cta < kMaxTracedCtas && at(cta, sm::kEntry, 0) != 0; ++cta, ++ctas)
      origin = std::min(origin, at(cta, sm::kEntry, 0));
    if (csv != nullptr)
      for (int cta = 0; cta < ctas; ++cta) {
        std::fprintf(csv, "%s,%d,%d,%d,%d", shape.name, shape.m, shape.n, shape.k, cta);
        for (int event = 0; event < sm::kStampCount; ++event)
          at(cta, event, 0) != 0 ? std::fprintf(csv, ",%.3f", (at(cta, event, 0) - origin) / 1e3) : std::fprintf(csv, ",");
        std::fprintf(csv, "\n");
      }
    std::string line = std::string(shape.name) + " N" + std::to_string(shape.n) + ": call " + std::to_string(call).substr(0, 5) + " us, " + std::to_string(ctas) + " CTAs;";
    for (int event = 0; event < sm::kStampCount; ++event) {
      std::vector<double> since;
      for (int cta = 0; cta < ctas; ++cta)
        if (at(cta, event, 0) != 0) since.push_back((at(cta, event, 0) - origin) / 1e3);
      char cell[96];
      if (since.empty()) std::snprintf(cell, sizeof(cell), " %s -;", kStampNames[event]);
      else std::snprintf(cell, sizeof(cell), " %s %.2f/%.2f;", kStampNames[event], median(since), *std::max_element(since.begin(), since.end()));
      line += cell;
    }
    // The global timer's step (the smallest nonzero gap between stamps) and, by the SM's own cycles, the
    // median CTA's entry-to-exit (a check on the timer's resolution).
    std::vector<unsigned long long> all;
    std::vector<double> cycles;
    for (int cta = 0; cta < ctas; ++cta) {
      for (int event = 0; event < sm::kStampCount; ++event)
        if (at(cta, event, 0) != 0) all.push_back(at(cta, event, 0));
      cycles.push_back(double(at(cta, sm::kExit, 1) - at(cta, sm::kEntry, 1)));
    }
    std::sort(all.begin(), all.end());
    unsigned long long step = ~0ull;
    for (size_t i = 1; i < all.size(); ++i)
      if (all[i] != all[i - 1]) step = std::min(step, all[i] - all[i - 1]);
    char tail[96];
    std::snprintf(tail, sizeof(tail), " timer step %llu ns; entry-exit %.0f cycles (median)", step, median(cycles));
    return line + tail;
  };
  std::vector<std::string> traces;

  // The clusters of each size the device runs at once (the plan's bound on Q), for M 64's kernel.
  sm::plan_for(64, 128, 128);
  const int* resident = sm::resident_clusters<64>();
  std::printf("clusters of C CTAs resident at once (M 64):");
  for (int c = 1; c <= sm::kMaxCluster; ++c) std::printf(" %d:%d", c, resident == nullptr ? -1 : resident[c]);
  std::printf("\n");

  std::printf("%-20s %6s %6s %6s %9s %5s %3s %9s %9s %9s %9s %9s %11s %11s\n", "shape", "M", "N", "K", "weight MB",
              "grid", "C", "units/CTA", "cold us", "cold GB/s", "warm us", "host us", "read cold", "read warm");
  for (const Shape& s : shapes) {
    const int kb = s.k / sm::kKBlock, slabs = (s.n + sm::kSlab - 1) / sm::kSlab, sa_ld = (s.m + 3) / 4 * 4;
    uint8_t *a = nullptr, *b = nullptr;
    float *sa = nullptr, *sb = nullptr;
    void* c = nullptr;
    check(cudaMalloc(&a, size_t(s.m) * s.k), "a");
    check(cudaMalloc(&b, size_t(s.n) * s.k), "b");
    check(cudaMalloc(&sa, sizeof(float) * sa_ld * kb), "sa");
    check(cudaMalloc(&sb, sizeof(float) * slabs * kb), "sb");
    check(cudaMalloc(&c, size_t(s.m) * s.n * 2), "c");
    fill_fp8<<<264, 256, 0, stream>>>(a, int64_t{s.m} * s.k, 1);
    fill_fp8<<<264, 256, 0, stream>>>(b, int64_t{s.n} * s.k, 2);
    fill_scales<<<64, 256, 0, stream>>>(sa, int64_t{sa_ld} * kb);
    fill_scales<<<64, 256, 0, stream>>>(sb, int64_t{slabs} * kb);
    check(cudaStreamSynchronize(stream), "fill");

    // The kernel, and the host's time in run() (its launch is asynchronous: the encodes and the launch).
    std::vector<double> host;
    const ColdWarm kernel = cold_and_warm([&] {
      const auto t0 = std::chrono::steady_clock::now();
      check(sm::run(a, sa, b, sb, c, s.m, s.n, s.k, sa_ld, stream), s.name);
      host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    });
    // The plain read of the same weight, 4 CTAs of 512 threads per SM.
    const int64_t vectors = int64_t{s.n} * s.k / 16;
    const unsigned read_grid = static_cast<unsigned>(4 * prop.multiProcessorCount);
    const ColdWarm read = cold_and_warm(
        [&] { read_kernel<<<read_grid, 512, 0, stream>>>(reinterpret_cast<const uint4*>(b), vectors, sink); });
    check(cudaGetLastError(), "read kernel");
    const auto plan = sm::plan_for(s.m, s.n, s.k);
    const int rounds = (plan.slabs + plan.clusters - 1) / plan.clusters;
    const double weight_mb = double(s.n) * s.k / 1e6;
    std::printf("%-20s %6d %6d %6d %9.1f %5d %3d %9d %9.2f %9.0f %9.2f %9.2f %11.2f %11.2f\n", s.name, s.m, s.n, s.k,
                weight_mb, plan.grid, plan.cluster, rounds * ((plan.kb + plan.cluster - 1) / plan.cluster), kernel.cold, weight_mb * 1e3 / kernel.cold,
                kernel.warm, median(host), read.cold, read.warm);
    traces.push_back(trace(s, [&] {
      check(sm::run(a, sa, b, sb, c, s.m, s.n, s.k, sa_ld, stream), s.name);
    }));
    for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(sa), static_cast<void*>(sb), c})
      check(cudaFree(p), "free");
  }
  std::printf("\nstamps of one cold call, us since the first CTA's entry (median/latest CTA):\n");
  for (const std::string& line : traces) std::printf("%s\n", line.c_str());
  if (csv != nullptr) std::fclose(csv);
  return 0;
}
