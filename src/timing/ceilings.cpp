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
#include "timing/cuda_util.hpp"
#include "timing/device_info.hpp"
#include "timing/stats.hpp"

#ifdef D2K_WITH_CUDA
#include <cublasLt.h>
#include <cublas_v2.h>
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
constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;


double median(std::vector<double> samples) { return summarize(std::move(samples)).median_ms; }

// Copy rate counting the bytes read and the bytes written, in 1e9 bytes per second.
double copy_gbps(std::size_t bytes, double ms) {
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

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

// Random one-byte values. fp8 e4m3: sign, exponent 4..7 (magnitudes 1/8 to 2), any mantissa, so never
// NaN (0x7F, 0xFF) and never zero; int8: -64..63. Not zeros, for the reason random_bf16 gives.
std::vector<uint8_t> random_bytes(std::size_t count, uint64_t seed, bool fp8) {
  std::vector<uint8_t> values(count);
  uint64_t state = seed;
  for (auto& value : values) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto bits = static_cast<uint32_t>(state >> 33);
    value = fp8 ? static_cast<uint8_t>((bits & 0x80) | ((4 + ((bits >> 3) & 3)) << 3) | (bits & 7))
                : static_cast<uint8_t>(static_cast<int>(bits % 128) - 64);
  }
  return values;
}

// Owners of the cuBLASLt objects one product needs.
struct LtProduct {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  LtProduct() = default;
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;
  ~LtProduct() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
  }
};

// The dense rate, in 1e12 per second, of an n^3 one-byte product through cuBLASLt: fp8 (e4m3 in,
// fp32 accumulate, bf16 out, unit scales) or int8 (i8 in, i32 accumulate and out). Both in the TN
// layout (A transposed, both operands K-major), the one layout Hopper's fp8 and int8 kernels take.
double lt_rate(cudaStream_t stream, bool fp8) {
  const int n = kGemmSize;
  const std::size_t elements = std::size_t{kGemmSize} * kGemmSize;
  const std::size_t out_bytes = elements * (fp8 ? sizeof(uint16_t) : sizeof(int32_t));
  DeviceBuffer a(elements), b(elements), d(out_bytes), workspace(kLtWorkspaceBytes), scales(2 * sizeof(float));
  std::vector<uint8_t> host = random_bytes(elements, 3, fp8);
  check_cuda(cudaMemcpy(a.get(), host.data(), elements, cudaMemcpyHostToDevice), "cudaMemcpy");
  host = random_bytes(elements, 4, fp8);
  check_cuda(cudaMemcpy(b.get(), host.data(), elements, cudaMemcpyHostToDevice), "cudaMemcpy");
  const float ones[2] = {1.0f, 1.0f};
  check_cuda(cudaMemcpy(scales.get(), ones, sizeof ones, cudaMemcpyHostToDevice), "cudaMemcpy");

  const cudaDataType in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
  const cudaDataType out_type = fp8 ? CUDA_R_16BF : CUDA_R_32I;
  const cudaDataType scale_type = fp8 ? CUDA_R_32F : CUDA_R_32I;
  const cublasComputeType_t compute = fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I;
  LtProduct lt;
  check_cublas(cublasLtCreate(&lt.handle), "cublasLtCreate");
  check_cublas(cublasLtMatmulDescCreate(&lt.desc, compute, scale_type), "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
               "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_cublas(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep),
               "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (fp8) {
    // The per-tensor scales of A and B a real fp8 GEMM carries; ones leave the values alone. (D is
    // bf16: a D scale applies only to an fp8 D.)
    const auto* scale = static_cast<const float*>(scales.get());
    const void* a_scale = scale;
    const void* b_scale = scale + 1;
    check_cublas(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale),
                 "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
    check_cublas(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale),
                 "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
  }
  // Column-major: A is stored K x M (transposed by the op), B K x N, C = D M x N.
  check_cublas(cublasLtMatrixLayoutCreate(&lt.a, in_type, n, n, n), "cublasLtMatrixLayoutCreate(A)");
  check_cublas(cublasLtMatrixLayoutCreate(&lt.b, in_type, n, n, n), "cublasLtMatrixLayoutCreate(B)");
  check_cublas(cublasLtMatrixLayoutCreate(&lt.c, out_type, n, n, n), "cublasLtMatrixLayoutCreate(C)");
  check_cublas(cublasLtMatmulPreferenceCreate(&lt.preference), "cublasLtMatmulPreferenceCreate");
  const std::size_t workspace_bytes = kLtWorkspaceBytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(lt.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof workspace_bytes),
               "cublasLtMatmulPreferenceSetAttribute");
  // The heuristic's first choice may still be refused at run time (CUBLAS_STATUS_NOT_SUPPORTED was seen
  // on the H200 for fp8): take the first of its candidates that runs.
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t candidates[kCandidates] = {};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.desc, lt.a, lt.b, lt.c, lt.c, lt.preference, kCandidates,
                                              candidates, &found),
               "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) fail("cuBLASLt has no {} algorithm for an {}^3 product", fp8 ? "fp8 (e4m3)" : "int8", n);

  const float alpha_f = 1.0f, beta_f = 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const void* alpha = fp8 ? static_cast<const void*>(&alpha_f) : static_cast<const void*>(&alpha_i);
  const void* beta = fp8 ? static_cast<const void*>(&beta_f) : static_cast<const void*>(&beta_i);
  const auto matmul = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(lt.handle, lt.desc, alpha, a.get(), lt.a, b.get(), lt.b, beta, d.get(), lt.c, d.get(), lt.c,
                          &algo, workspace.get(), kLtWorkspaceBytes, stream);
  };
  const cublasLtMatmulAlgo_t* chosen = nullptr;
  std::string refused;
  for (int i = 0; i < found && chosen == nullptr; ++i) {
    const cublasStatus_t status = matmul(candidates[i].algo);
    if (status == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(stream) == cudaSuccess) {
      chosen = &candidates[i].algo;
    } else {
      refused = cublasGetStatusName(status);
    }
  }
  if (chosen == nullptr)
    fail("cuBLASLt refused all {} {} algorithms its heuristic offered (last: {})", found,
         fp8 ? "fp8 (e4m3)" : "int8", refused);
  double ms = median_ms(stream, kGemmSamples, [&] {
    check_cublas(matmul(*chosen), fp8 ? "cublasLtMatmul (fp8)" : "cublasLtMatmul (int8)");
  });
  return 2.0 * n * double(n) * n / (ms * 1e-3) / 1e12;
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
      (fp8 ? ceilings.fp8_tflops : ceilings.int8_tops) = lt_rate(stream.get(), fp8);
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
    return nlohmann::json::parse(in).get<Ceilings>();
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
    *progress << fmt::format("  copy {:.0f} GB/s", ceilings.copy_gbps);
    if (ceilings.bf16_tflops) *progress << fmt::format(", bf16 {:.0f} TFLOP/s", *ceilings.bf16_tflops);
    if (ceilings.fp8_tflops) *progress << fmt::format(", fp8 {:.0f} TFLOP/s", *ceilings.fp8_tflops);
    if (ceilings.int8_tops) *progress << fmt::format(", int8 {:.0f} TOPS", *ceilings.int8_tops);
    *progress << fmt::format("; cached in {}\n", file.string());
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
