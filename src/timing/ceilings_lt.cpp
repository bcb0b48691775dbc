#include "timing/ceilings_lt.hpp"

#ifdef D2K_WITH_CUDA
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "timing/stats.hpp"

namespace d2k {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
constexpr int kCandidates = 16;
constexpr uint32_t kAlignment = 256;  // what cudaMalloc gives

std::string type_name(cudaDataType type) {
  switch (type) {
    case CUDA_R_8F_E4M3: return "e4m3";
    case CUDA_R_8F_E5M2: return "e5m2";
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_16F: return "fp16";
    case CUDA_R_32F: return "fp32";
    case CUDA_R_8I: return "i8";
    case CUDA_R_32I: return "i32";
    default: return fmt::format("cudaDataType {}", static_cast<int>(type));
  }
}

std::string compute_name(cublasComputeType_t compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_32F: return "32F";
    case CUBLAS_COMPUTE_32I: return "32I";
    default: return fmt::format("cublasComputeType {}", static_cast<int>(compute));
  }
}

bool is_fp8(cudaDataType type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

// Random one-byte values. fp8 e4m3: sign, exponent 4..7 (magnitudes 1/8 to 2), any mantissa, so never
// NaN (0x7F, 0xFF) and never zero; int8: -64..63.
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

void upload(const DeviceBuffer& buffer, const void* host, std::size_t bytes) {
  check_cuda(cudaMemcpy(buffer.get(), host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

// Owners of the cuBLASLt objects of one attempt.
struct LtObjects {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  LtObjects() = default;
  LtObjects(const LtObjects&) = delete;
  LtObjects& operator=(const LtObjects&) = delete;
  ~LtObjects() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {d, c, b, a})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
  }
};

template <typename T>
cublasStatus_t set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value);
}

template <typename T>
cublasStatus_t set(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                   const T& value) {
  return cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value);
}

// The median time of one product, in ms, after `warmup` untimed ones; the refusal if one is refused.
std::pair<std::optional<double>, cublasStatus_t> median_product_ms(cudaStream_t stream, int warmup, int samples,
                                                                   const auto& product) {
  CudaEvent start, end;
  std::vector<double> times;
  for (int i = 0; i < warmup + samples; ++i) {
    check_cuda(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    const cublasStatus_t status = product();
    if (status != CUBLAS_STATUS_SUCCESS) return {std::nullopt, status};
    check_cuda(cudaEventRecord(end.get(), stream), "cudaEventRecord");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (i >= warmup) times.push_back(elapsed_ms(start, end));
  }
  return {summarize(std::move(times)).median_ms, CUBLAS_STATUS_SUCCESS};
}

}  // namespace

std::string LtConfig::describe() const {
  std::string text = fmt::format("{} {}{} -> {} (C {}, {})", type_name(ab_type), a_transposed ? 'T' : 'N',
                                 b_transposed ? 'T' : 'N', type_name(d_type), type_name(c_type),
                                 in_place ? "in place" : "own buffer");
  if (ab_scales) {
    text += ", A/B scales";
  } else if (is_fp8(ab_type)) {
    text += ", no A/B scales";
  }
  if (d_scale) text += ", D scale and amax";
  if (scalar_scale_modes) text += ", scale modes SCALAR_32F";
  if (fast_accum) text += *fast_accum ? ", fast accum on" : ", fast accum off";
  if (alignment_hints) text += ", alignment hints";
  if (!workspace) text += ", no workspace";
  if (algo_by_matmul) text += ", algo chosen by cublasLtMatmul";
  text += ", compute " + compute_name(compute);
  return text;
}

std::vector<LtConfig> fp8_configs() {
  const LtConfig documented;  // e4m3 TN -> bf16 in place, unit A/B scales, every other attribute default
  // Every attribute PyTorch's _scaled_mm and TransformerEngine set, set explicitly to the default.
  LtConfig explicit_defaults = documented;
  explicit_defaults.scalar_scale_modes = true;
  explicit_defaults.fast_accum = 0;
  explicit_defaults.alignment_hints = true;
  LtConfig fast_accum = explicit_defaults;
  fast_accum.fast_accum = 1;
  LtConfig own_c = documented;
  own_c.in_place = false;
  LtConfig unscaled = documented;
  unscaled.ab_scales = false;
  // NVIDIA's LtFp8Matmul sample: an e4m3 D with its scale and amax, C bf16.
  LtConfig fp8_out = explicit_defaults;
  fp8_out.d_type = CUDA_R_8F_E4M3;
  fp8_out.in_place = false;
  fp8_out.d_scale = true;
  LtConfig fp16_out = documented;
  fp16_out.c_type = fp16_out.d_type = CUDA_R_16F;
  LtConfig fp32_out = documented;
  fp32_out.c_type = fp32_out.d_type = CUDA_R_32F;
  LtConfig no_workspace = documented;
  no_workspace.workspace = false;
  // PyTorch's int8 product leaves the algorithm to cublasLtMatmul, without workspace.
  LtConfig by_matmul = no_workspace;
  by_matmul.algo_by_matmul = true;
  return {documented, explicit_defaults, fast_accum, own_c, unscaled, fp8_out, fp16_out, fp32_out, no_workspace,
          by_matmul};
}

std::vector<LtConfig> int8_configs() {
  LtConfig documented;
  documented.ab_type = CUDA_R_8I;
  documented.c_type = documented.d_type = CUDA_R_32I;
  documented.compute = CUBLAS_COMPUTE_32I;
  documented.scale_type = CUDA_R_32I;
  documented.ab_scales = false;
  LtConfig own_c = documented;
  own_c.in_place = false;
  own_c.alignment_hints = true;
  LtConfig by_matmul = documented;
  by_matmul.workspace = false;
  by_matmul.algo_by_matmul = true;
  return {documented, own_c, by_matmul};
}

LtOperands::LtOperands(int size, bool fp8_operands)
    : n(size),
      fp8(fp8_operands),
      a(std::size_t(size) * size),
      b(std::size_t(size) * size),
      c(std::size_t(size) * size * 4),
      d(std::size_t(size) * size * 4),
      a_scale(sizeof(float)),
      b_scale(sizeof(float)),
      d_scale(sizeof(float)),
      amax(sizeof(float)),
      workspace(kWorkspaceBytes) {
  const std::size_t elements = std::size_t(size) * size;
  upload(a, random_bytes(elements, 3, fp8).data(), elements);
  upload(b, random_bytes(elements, 4, fp8).data(), elements);
  check_cuda(cudaMemset(c.get(), 0, c.bytes()), "cudaMemset");
  check_cuda(cudaMemset(d.get(), 0, d.bytes()), "cudaMemset");
  const float one = 1.0f, zero = 0.0f;
  for (const DeviceBuffer* scale : {&a_scale, &b_scale, &d_scale}) upload(*scale, &one, sizeof one);
  upload(amax, &zero, sizeof zero);
}

double LtAttempt::rate() const {
  if (!ran()) return 0;
  return 2.0 * n * double(n) * n / (*candidates[static_cast<std::size_t>(chosen)].ms * 1e-3) / 1e12;
}

std::string short_status(cublasStatus_t status) {
  std::string name = cublasGetStatusName(status);
  return name.starts_with("CUBLAS_STATUS_") ? name.substr(14) : name;
}

std::string LtAttempt::summary() const {
  if (!failed_call.empty()) return fmt::format("{} returned {}", failed_call, short_status(failed_status));
  if (candidates.empty()) return "the heuristic offered no algorithm";
  if (by_matmul) {
    const auto& run = candidates.front().run;
    return fmt::format("run: {}{}", run ? short_status(*run) : "-",
                       stream_error.empty() ? "" : "; then the stream failed: " + stream_error);
  }
  // Runs of equal (check, run) pairs, in the heuristic's order: "SUCCESS/NOT_SUPPORTED x8".
  std::string text = fmt::format("heuristic offered {}; check/run:", candidates.size());
  const auto pair = [](const LtCandidate& candidate) {
    return short_status(candidate.check) + "/" + (candidate.run ? short_status(*candidate.run) : "-");
  };
  for (std::size_t i = 0; i < candidates.size();) {
    std::size_t j = i + 1;
    while (j < candidates.size() && pair(candidates[j]) == pair(candidates[i])) ++j;
    text += fmt::format("{} {}{}", i == 0 ? "" : ",", pair(candidates[i]), j - i > 1 ? fmt::format(" x{}", j - i) : "");
    i = j;
  }
  if (!stream_error.empty()) text += "; then the stream failed: " + stream_error;
  return text;
}

namespace {

// Records the first cuBLASLt call that fails in the attempt; true while all succeed.
struct LtCalls {
  LtAttempt& attempt;
  bool operator()(cublasStatus_t status, const char* call) const {
    if (status == CUBLAS_STATUS_SUCCESS) return true;
    attempt.failed_call = call;
    attempt.failed_status = status;
    return false;
  }
};

// The handle, the matmul descriptor, the four layouts and the preference of a configuration.
bool describe_lt(const LtConfig& config, const LtOperands& operands, LtObjects& lt, const LtCalls& ok) {
  const uint64_t n = static_cast<uint64_t>(operands.n);
  if (!ok(cublasLtCreate(&lt.handle), "cublasLtCreate")) return false;
  if (!ok(cublasLtMatmulDescCreate(&lt.desc, config.compute, config.scale_type), "cublasLtMatmulDescCreate")) return false;
  const cublasOperation_t transa = config.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t transb = config.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, transa), "set TRANSA")) return false;
  if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, transb), "set TRANSB")) return false;
  const int32_t scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  if (config.ab_scales) {
    const void* a_scale = operands.a_scale.get();
    const void* b_scale = operands.b_scale.get();
    if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale), "set A_SCALE_POINTER")) return false;
    if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale), "set B_SCALE_POINTER")) return false;
  }
  if (config.scalar_scale_modes) {
    if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, scalar), "set A_SCALE_MODE")) return false;
    if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, scalar), "set B_SCALE_MODE")) return false;
  }
  if (config.d_scale) {
    const void* d_scale = operands.d_scale.get();
    void* amax = operands.amax.get();
    if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, d_scale), "set D_SCALE_POINTER")) return false;
    if (!ok(set(lt.desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax), "set AMAX_D_POINTER")) return false;
    if (config.scalar_scale_modes && !ok(set(lt.desc, CUBLASLT_MATMUL_DESC_D_SCALE_MODE, scalar), "set D_SCALE_MODE"))
      return false;
  }
  if (config.fast_accum && !ok(set(lt.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, *config.fast_accum), "set FAST_ACCUM"))
    return false;
  // Square, so the transposes change no shape; each leading dimension is n (a multiple of 16 bytes).
  if (!ok(cublasLtMatrixLayoutCreate(&lt.a, config.ab_type, n, n, n), "cublasLtMatrixLayoutCreate(A)") ||
      !ok(cublasLtMatrixLayoutCreate(&lt.b, config.ab_type, n, n, n), "cublasLtMatrixLayoutCreate(B)") ||
      !ok(cublasLtMatrixLayoutCreate(&lt.c, config.c_type, n, n, n), "cublasLtMatrixLayoutCreate(C)") ||
      !ok(cublasLtMatrixLayoutCreate(&lt.d, config.d_type, n, n, n), "cublasLtMatrixLayoutCreate(D)"))
    return false;
  if (!ok(cublasLtMatmulPreferenceCreate(&lt.preference), "cublasLtMatmulPreferenceCreate")) return false;
  const std::size_t workspace_bytes = config.workspace ? kWorkspaceBytes : 0;
  if (!ok(set(lt.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes), "set MAX_WORKSPACE_BYTES"))
    return false;
  if (config.alignment_hints) {
    for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                 CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (!ok(set(lt.preference, attribute, kAlignment), "set MIN_ALIGNMENT")) return false;
  }
  return true;
}

}  // namespace

LtAttempt attempt_lt(const LtConfig& config, const LtOperands& operands, cudaStream_t stream, LtTiming timing,
                     int warmup, int samples) {
  if (config.in_place && config.c_type != config.d_type)
    fail("cuBLASLt configuration '{}': C and D share a buffer but differ in type", config.describe());
  LtAttempt attempt;
  attempt.n = operands.n;
  attempt.by_matmul = config.algo_by_matmul;
  LtObjects lt;
  const LtCalls ok{attempt};
  if (!describe_lt(config, operands, lt, ok)) return attempt;
  const std::size_t workspace_bytes = config.workspace ? kWorkspaceBytes : 0;
  void* workspace = config.workspace ? operands.workspace.get() : nullptr;
  cublasLtMatmulHeuristicResult_t offered[kCandidates] = {};
  int found = 0;
  if (config.algo_by_matmul) {
    found = 1;
    attempt.candidates.emplace_back();
  } else {
    if (!ok(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.desc, lt.a, lt.b, lt.c, lt.d, lt.preference, kCandidates,
                                           offered, &found),
            "cublasLtMatmulAlgoGetHeuristic"))
      return attempt;
    for (int i = 0; i < found; ++i) {
      LtCandidate candidate;
      candidate.workspace_bytes = offered[i].workspaceSize;
      candidate.check = offered[i].state;
      if (candidate.check == CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulHeuristicResult_t checked{};
        candidate.check =
            cublasLtMatmulAlgoCheck(lt.handle, lt.desc, lt.a, lt.b, lt.c, lt.d, &offered[i].algo, &checked);
      }
      attempt.candidates.push_back(candidate);
    }
  }

  const float alpha_f = 1.0f, beta_f = 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const bool float_scale = config.scale_type == CUDA_R_32F;
  const void* alpha = float_scale ? static_cast<const void*>(&alpha_f) : static_cast<const void*>(&alpha_i);
  const void* beta = float_scale ? static_cast<const void*>(&beta_f) : static_cast<const void*>(&beta_i);
  void* d = operands.d.get();
  const void* c = config.in_place ? d : operands.c.get();
  for (int i = 0; i < found; ++i) {
    if (attempt.ran() && timing == LtTiming::first_that_runs) break;
    LtCandidate& candidate = attempt.candidates[static_cast<std::size_t>(i)];
    // Even a candidate that cublasLtMatmulAlgoCheck refuses is run: what cublasLtMatmul says is the point.
    const cublasLtMatmulAlgo_t* algo = config.algo_by_matmul ? nullptr : &offered[i].algo;
    const auto product = [&] {
      return cublasLtMatmul(lt.handle, lt.desc, alpha, operands.a.get(), lt.a, operands.b.get(), lt.b, beta, c, lt.c,
                            d, lt.d, algo, workspace, workspace_bytes, stream);
    };
    candidate.run = product();
    if (*candidate.run != CUBLAS_STATUS_SUCCESS) continue;
    if (const cudaError_t error = cudaStreamSynchronize(stream); error != cudaSuccess) {
      // A product that faults leaves the context unusable: no later call would tell anything.
      attempt.stream_error = cuda_error_text(error);
      break;
    }
    const auto [ms, status] = median_product_ms(stream, warmup, samples, product);
    candidate.run = status;
    candidate.ms = ms;
    if (ms && (!attempt.ran() || *ms < *attempt.candidates[static_cast<std::size_t>(attempt.chosen)].ms))
      attempt.chosen = i;
  }
  return attempt;
}

std::string lt_version() {
  const std::size_t version = cublasLtGetVersion();
  Dl_info library{};
  const bool located = dladdr(reinterpret_cast<void*>(&cublasLtMatmul), &library) != 0 && library.dli_fname;
  return fmt::format("cuBLASLt {}.{}.{} (headers {}.{}.{}, cudart {}, {})", version / 10000, version / 100 % 100,
                     version % 100, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH, cublasLtGetCudartVersion(),
                     located ? library.dli_fname : "library path unknown");
}

}  // namespace d2k
#endif
