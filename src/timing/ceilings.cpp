#include "timing/ceilings.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <iostream>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "core/timestamp.hpp"
#include "core/json.hpp"
#include "timing/ceilings_lt.hpp"
#include "timing/cuda_util.hpp"
#include "timing/device_info.hpp"
#include "timing/stats.hpp"

#ifdef D2K_WITH_CUDA
#include <cublas_v2.h>

#include "timing/read_stream.hpp"
#endif

namespace fs = std::filesystem;

namespace d2k {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kCpuCopyBytes = std::size_t{256} << 20;
constexpr std::size_t kCudaCopyBytes = std::size_t{1} << 30;
constexpr int kGemmSize = 8192;
constexpr int kCopySamples = 20;
constexpr int kGemmSamples = 10;
constexpr int kWarmup = 3;


double median(std::vector<double> samples) { return summarize(std::move(samples)).median_ms; }

// Copy rate counting the bytes read and the bytes written, in 1e9 bytes per second.
double copy_gbps(std::size_t bytes, double ms) {
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

double read_gbps(std::size_t bytes, double ms) { return static_cast<double>(bytes) / (ms * 1e-3) / 1e9; }

Ceilings measure_cpu() {
  // Value-initialized, so every page is touched before timing.
  std::vector<unsigned char> source(kCpuCopyBytes, 1), target(kCpuCopyBytes, 0);
  std::vector<double> samples;
  for (int i = 0; i < kWarmup + kCopySamples; ++i) {
    source[static_cast<std::size_t>(i) * 4096 % kCpuCopyBytes] = static_cast<unsigned char>(i);
    Clock::time_point begin = Clock::now();
    std::memcpy(target.data(), source.data(), kCpuCopyBytes);
    asm volatile("" : : "r"(target.data()) : "memory");
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
    if (i >= kWarmup) samples.push_back(ms);
  }
  Ceilings ceilings;
  ceilings.copy_gbps = copy_gbps(kCpuCopyBytes, median(samples));
  // The read rate: every word of the source summed once (the sum kept alive, so the loop stays).
  samples.clear();
  const auto* words = reinterpret_cast<const uint64_t*>(source.data());
  for (int i = 0; i < kWarmup + kCopySamples; ++i) {
    Clock::time_point begin = Clock::now();
    uint64_t sum = 0;
    for (std::size_t w = 0; w < kCpuCopyBytes / sizeof(uint64_t); ++w) sum += words[w];
    asm volatile("" : : "r"(sum) : "memory");
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
    if (i >= kWarmup) samples.push_back(ms);
  }
  ceilings.read_gbps = read_gbps(kCpuCopyBytes, median(samples));
  return ceilings;
}

#ifdef D2K_WITH_CUDA
void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("{} failed: {}", what, cublasGetStatusName(status));
}

class CublasHandle {
 public:
  CublasHandle() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Times `work` on `stream` with events, after warm-up calls; returns the median in ms.
template <typename Work>
double median_ms(cudaStream_t stream, int samples, Work&& work) {
  CudaEvent start, end;
  std::vector<double> times;
  for (int i = 0; i < kWarmup + samples; ++i) {
    check_cuda(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    work();
    check_cuda(cudaEventRecord(end.get(), stream), "cudaEventRecord");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (i >= kWarmup) times.push_back(elapsed_ms(start, end));
  }
  return median(times);
}

// Uniform values in [-1, 1) as bf16 bits. Random data, because zeros let the tensor cores draw less
// power and run faster than any real product would.
std::vector<uint16_t> random_bf16(std::size_t count, uint64_t seed) {
  std::vector<uint16_t> values(count);
  uint64_t state = seed;
  for (auto& value : values) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    float f = static_cast<float>(static_cast<uint32_t>(state >> 40)) / float(1 << 24) * 2.0f - 1.0f;
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
    value = static_cast<uint16_t>(bits >> 16);
  }
  return values;
}

// A dense one-byte rate and how cuBLASLt was asked for it.
struct LtRate {
  double rate = 0;
  std::string config;
};

// The dense rate, in 1e12 per second, of an n^3 one-byte product through cuBLASLt: fp8 (e4m3 in, fp32
// accumulate) or int8 (i8 in, i32 accumulate), from the first configuration of fp8_configs() or
// int8_configs() that cuBLASLt runs.
LtRate lt_rate(cudaStream_t stream, bool fp8) {
  const LtOperands operands(kGemmSize, fp8);
  const std::vector<LtConfig> configs = fp8 ? fp8_configs() : int8_configs();
  std::string refusals;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const LtAttempt attempt =
        attempt_lt(configs[i], operands, stream, LtTiming::first_that_runs, kWarmup, kGemmSamples);
    if (attempt.ran()) return {attempt.rate(), configs[i].describe()};
    refusals += fmt::format("; [{}] {}: {}", i + 1, configs[i].describe(), attempt.summary());
    if (!attempt.stream_error.empty()) break;
  }
  fail("{} ran no {} product of size {} in any of the {} configurations tried{} (build/tools/d2k-lt-probe "
       "prints cuBLASLt's own reasons)",
       lt_version(), fp8 ? "fp8 (e4m3)" : "int8", kGemmSize, configs.size(), refusals);
}

Ceilings measure_cuda() {
  CudaStream stream;
  Ceilings ceilings;
  {
    DeviceBuffer source(kCudaCopyBytes), target(kCudaCopyBytes);
    check_cuda(cudaMemset(source.get(), 1, kCudaCopyBytes), "cudaMemset");
    double ms = median_ms(stream.get(), kCopySamples, [&] {
      check_cuda(
          cudaMemcpyAsync(target.get(), source.get(), kCudaCopyBytes, cudaMemcpyDeviceToDevice, stream.get()),
          "cudaMemcpyAsync");
    });
    ceilings.copy_gbps = copy_gbps(kCudaCopyBytes, ms);
    // The read rate over the same source: a grid that fills the SMs once, and one of several waves; the
    // faster counts.
    int device = 0, sms = 0, clock_khz = 0, major = 0, minor = 0, memory_khz = 0, bus_bits = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    ceilings.sm_count = sms;
    ceilings.sm_max_mhz = clock_khz / 1000;
    ceilings.compute_capability = major * 10 + minor;
    check_cuda(cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device), "cudaDeviceGetAttribute");
    ceilings.memory_max_mhz = memory_khz / 1000;
    ceilings.memory_bus_bits = bus_bits;
    DeviceBuffer sink(sizeof(unsigned));
    for (const int blocks : {4 * sms, 32 * sms}) {
      ms = median_ms(stream.get(), kCopySamples, [&] {
        check_cuda(read_stream(source.get(), kCudaCopyBytes, blocks, static_cast<unsigned*>(sink.get()), stream.get()),
                   "read_stream");
      });
      ceilings.read_gbps = std::max(ceilings.read_gbps, read_gbps(kCudaCopyBytes, ms));
    }
  }
  {
    const std::size_t elements = std::size_t{kGemmSize} * kGemmSize;
    const std::size_t bytes = elements * sizeof(uint16_t);
    DeviceBuffer a(bytes), b(bytes), c(bytes);
    std::vector<uint16_t> host = random_bf16(elements, 1);
    check_cuda(cudaMemcpy(a.get(), host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    host = random_bf16(elements, 2);
    check_cuda(cudaMemcpy(b.get(), host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    CublasHandle handle;
    check_cublas(cublasSetStream(handle.get(), stream.get()), "cublasSetStream");
    const float alpha = 1.0f, beta = 0.0f;
    double ms = median_ms(stream.get(), kGemmSamples, [&] {
      check_cublas(
          cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, kGemmSize, kGemmSize, kGemmSize, &alpha,
                       a.get(), CUDA_R_16BF, kGemmSize, b.get(), CUDA_R_16BF, kGemmSize, &beta, c.get(),
                       CUDA_R_16BF, kGemmSize, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    });
    double flops = 2.0 * kGemmSize * double(kGemmSize) * kGemmSize;
    ceilings.bf16_tflops = flops / (ms * 1e-3) / 1e12;
  }
  // A rate cuBLASLt cannot measure here stays unknown (tasks whose FLOPs need it get no % of speed of
  // light and no floor from it) rather than stopping every evaluation on the device.
  for (const bool fp8 : {true, false}) {
    try {
      const LtRate measured = lt_rate(stream.get(), fp8);
      (fp8 ? ceilings.fp8_tflops : ceilings.int8_tops) = measured.rate;
      (fp8 ? ceilings.fp8_config : ceilings.int8_config) = measured.config;
    } catch (const Error& error) {
      std::cerr << fmt::format("d2k: warning: the {} matrix rate was not measured: {}\n", fp8 ? "fp8" : "int8",
                               error.what());
    }
  }
  return ceilings;
}
#endif

std::string sanitized(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

std::optional<Ceilings> read_cache(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json cached = nlohmann::json::parse(in);
    // A d2k from before the configurations were recorded could not measure fp8 on Hopper (an
    // H200 refused every algorithm of its one configuration) and cached the rate as unknown: measure
    // such a cache again instead of keeping the gap for good.
    const bool fp8_missing = !cached.contains("fp8_tflops") || cached.at("fp8_tflops").is_null();
    if (!cached.contains("fp8_config") && fp8_missing) return std::nullopt;
    // Nor one from before the read rate was measured: its floors sat above kernels that read much more
    // than they write.
    if (!cached.contains("read_gbps")) return std::nullopt;
    // Nor a GPU's from before the matrix bound's inputs were recorded: without them a kernel faster than
    // the measured matrix rate is held to it (a false alarm on the fastest GEMMs).
    const bool gpu = cached.contains("bf16_tflops") && !cached.at("bf16_tflops").is_null();
    if (gpu && !cached.contains("sm_max_mhz")) return std::nullopt;
    // Nor one from before the memory bound's: an expert at the measured read rate was rejected by it.
    if (gpu && !cached.contains("memory_bus_bits")) return std::nullopt;
    return cached.get<Ceilings>();
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged cache is measured again, not trusted
  }
}

}  // namespace

Ceilings measure_ceilings(Device device) {
  Ceilings ceilings;
  if (device == Device::cpu) {
    ceilings = measure_cpu();
  } else {
#ifdef D2K_WITH_CUDA
    ceilings = measure_cuda();
#else
    fail("cannot measure the cuda device: d2k was built without CUDA");
#endif
  }
  ceilings.device_name = device_name(device);
  ceilings.device_id = device_id(device);
  ceilings.measured_at = utc_timestamp();
  return ceilings;
}

fs::path ceilings_file(Device device, const fs::path& cache_dir) {
  return cache_dir / fmt::format("ceilings-{}-{}.json", name_of(device), sanitized(device_id(device)));
}

Ceilings cached_ceilings(Device device, const fs::path& cache_dir, bool refresh, std::ostream* progress) {
  fs::path file = ceilings_file(device, cache_dir);
  if (!refresh) {
    if (std::optional<Ceilings> cached = read_cache(file)) return *cached;
  }
  if (progress)
    *progress << fmt::format("measuring the {} ceilings of {} ...\n", name_of(device), device_name(device));
  Ceilings ceilings = measure_ceilings(device);
  if (progress) {
    *progress << fmt::format("  copy {:.0f} GB/s, read {:.0f} GB/s", ceilings.copy_gbps, ceilings.read_gbps);
    if (ceilings.bf16_tflops) *progress << fmt::format(", bf16 {:.0f} TFLOP/s", *ceilings.bf16_tflops);
    if (ceilings.fp8_tflops) *progress << fmt::format(", fp8 {:.0f} TFLOP/s", *ceilings.fp8_tflops);
    if (ceilings.int8_tops) *progress << fmt::format(", int8 {:.0f} TOPS", *ceilings.int8_tops);
    *progress << fmt::format("; cached in {}\n", file.string());
    if (ceilings.sm_count > 0)
      *progress << fmt::format("  bounds: {} SMs at up to {} MHz, sm_{}{}\n", ceilings.sm_count, ceilings.sm_max_mhz,
                               ceilings.compute_capability,
                               ceilings.matrix_bound(DType::bf16) ? "" : " (matrix rate per clock unknown: no bound)");
    if (auto memory = ceilings.memory_bound_gbps())
      *progress << fmt::format("  memory bound: {:.0f} GB/s ({}-bit bus at up to {} MHz)\n", *memory,
                               ceilings.memory_bus_bits, ceilings.memory_max_mhz);
    if (!ceilings.fp8_config.empty()) *progress << fmt::format("  fp8 as {}\n", ceilings.fp8_config);
    if (!ceilings.int8_config.empty()) *progress << fmt::format("  int8 as {}\n", ceilings.int8_config);
  }
  std::error_code error;
  fs::create_directories(cache_dir, error);
  // Written beside and renamed, so that a reader never sees half a file.
  fs::path temp = file;
  temp += fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream out(temp);
    out << nlohmann::json(ceilings).dump(2) << "\n";
    if (!out) fail("cannot write the ceilings cache {}", temp.string());
  }
  fs::rename(temp, file);
  return ceilings;
}

}  // namespace d2k
