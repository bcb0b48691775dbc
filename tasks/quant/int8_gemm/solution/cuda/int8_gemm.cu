// Expert CUDA solution of quant/int8_gemm for the H200 (sm_90a), on CUTLASS 4.2's sm90 collectives.
//
// D = s_a[m] s_b[n] (A B^T in int32) + bias[n], bf16. The int32 product is exact, so every schedule
// (split K, stream-K partial sums, any order) gives the same accumulator; what decides the time is
// keeping the tensor cores fed. Small M reads each weight byte once and computes little: the kernel is a
// weight stream, and its output tiles are too few for 132 SMs unless K is split. Large M is compute
// bound: big tiles, multicast B, persistent CTAs. gemm_kernels.cuh holds the three kernel types; this
// file checks the call, picks one by M and runs it.
// Before any header: CUTLASS's device-side asserts are calls out of the kernel, and ptxas serializes every
// wgmma across such a call (warning C7510: the mainloop loses its MMA overlap). The build sets no NDEBUG.
#ifndef NDEBUG
#define NDEBUG
#endif

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"
#include "gemm_kernels.cuh"

namespace {

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

struct Problem {
  const int8_t* a;
  const int8_t* b;
  const float* s_a;
  const float* s_b;
  const cutlass::bfloat16_t* bias;
  cutlass::bfloat16_t* d;
  int m, n, k;
};

bool contiguous(const d2k_tensor& t) {
  int64_t expected = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

// Inputs a, b, s_a, s_b, bias and output d, in the task's order; contiguous, with the alignments TMA
// needs (16-byte rows of A, B and D: K % 16 == 0 and N % 8 == 0, which the task guarantees).
int read_problem(const d2k_call* call, Problem* p) {
  if (call->num_inputs != 5 || call->num_outputs != 1)
    return fail(call, "quant/int8_gemm: expected 5 inputs and 1 output, got %d and %d", call->num_inputs, call->num_outputs);
  const d2k_tensor* in = call->inputs;
  const d2k_tensor& d = call->outputs[0];
  const d2k_dtype want[5] = {D2K_INT8, D2K_INT8, D2K_FLOAT32, D2K_FLOAT32, D2K_BFLOAT16};
  for (int i = 0; i < 5; ++i) {
    if (in[i].dtype != want[i]) return fail(call, "quant/int8_gemm: input %s has dtype %d, expected %d", in[i].name, in[i].dtype, want[i]);
    if (!contiguous(in[i])) return fail(call, "quant/int8_gemm: input %s is not contiguous", in[i].name);
  }
  if (d.dtype != D2K_BFLOAT16 || !contiguous(d)) return fail(call, "quant/int8_gemm: output d must be contiguous bf16");
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[0];
  if (in[1].shape[1] != k || in[2].shape[0] != m || in[3].shape[0] != n || in[4].shape[0] != n || d.shape[0] != m ||
      d.shape[1] != n)
    return fail(call, "quant/int8_gemm: shapes disagree (M %lld, N %lld, K %lld)", (long long)m, (long long)n, (long long)k);
  if (k % 16 != 0 || n % 8 != 0)
    return fail(call, "quant/int8_gemm: K = %lld must be a multiple of 16 and N = %lld of 8 (TMA's 16-byte rows)",
                (long long)k, (long long)n);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return fail(call, "quant/int8_gemm: an extent exceeds int32");
  *p = {static_cast<const int8_t*>(in[0].data), static_cast<const int8_t*>(in[1].data), static_cast<const float*>(in[2].data),
        static_cast<const float*>(in[3].data), static_cast<const cutlass::bfloat16_t*>(in[4].data),
        static_cast<cutlass::bfloat16_t*>(d.data), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)};
  return 0;
}

int sm_count() {
  static int count = 0;  // the device's SM count, asked once: the scheduler sizes its grid by it
  if (count == 0) {
    int device = 0;
    cudaGetDevice(&device);
    count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
  }
  return count;
}

// A packed rows x cols (x 1 batch) stride of CuTe type S: column-major where S's first stride is the
// static 1, row-major otherwise.
template <class S>
S packed(int rows, int cols) {
  S s{};
  if constexpr (cute::is_static_v<decltype(cute::get<0>(s))>) {
    cute::get<1>(s) = rows;
  } else {
    cute::get<0>(s) = cols;
  }
  cute::get<2>(s) = static_cast<int64_t>(rows) * cols;
  return s;
}

template <class K>
typename K::Gemm::Arguments arguments_of(const Problem& p) {
  using Gemm = typename K::Gemm;
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  // Swapped: the weight is the first operand and D^T (N x M, column-major) the output.
  const int rows = K::swapped ? p.n : p.m, cols = K::swapped ? p.m : p.n;
  const int8_t* first = K::swapped ? p.b : p.a;
  const int8_t* second = K::swapped ? p.a : p.b;
  const auto stride_a = packed<StrideA>(rows, p.k);  // K-major: (K, 1, rows K)
  const auto stride_b = packed<StrideB>(cols, p.k);
  const auto stride_d = packed<StrideD>(rows, cols);
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {rows, cols, p.k, 1},
                                {first, stride_a, second, stride_b},
                                {K::Fusion::arguments(p.s_a, p.s_b, p.bias), nullptr, stride_d, p.d, stride_d}};
  args.hw_info.device_id = 0;
  cudaGetDevice(&args.hw_info.device_id);
  args.hw_info.sm_count = sm_count();
  return args;
}

template <class K>
size_t workspace_of(const Problem& p) {
  return K::Gemm::get_workspace_size(arguments_of<K>(p));
}

template <class K>
int run(const d2k_call* call, const Problem& p) {
  typename K::Gemm gemm;
  auto args = arguments_of<K>(p);
  if (gemm.can_implement(args) != cutlass::Status::kSuccess)
    return fail(call, "quant/int8_gemm: CUTLASS cannot run M %d N %d K %d with this kernel", p.m, p.n, p.k);
  if (K::Gemm::get_workspace_size(args) > call->workspace_bytes)
    return fail(call, "quant/int8_gemm: the workspace holds %zu bytes, the kernel needs %zu", call->workspace_bytes,
                K::Gemm::get_workspace_size(args));
  auto stream = static_cast<cudaStream_t>(call->stream);
  // initialize() zeroes the stream-K flags in the workspace (the harness poisons it before every call).
  cutlass::Status status = gemm.initialize(args, call->workspace, stream);
  if (status == cutlass::Status::kSuccess) status = gemm.run(stream);
  if (status != cutlass::Status::kSuccess)
    return fail(call, "quant/int8_gemm: CUTLASS failed: %s (%s)", cutlass::cutlassGetStatusString(status),
                cudaGetErrorString(cudaGetLastError()));
  return 0;
}

// The kernel for M: see gemm_kernels.cuh for why each.
template <class F>
auto dispatch(const Problem& p, F&& f) {
  if (p.m <= 64) return f(int8_gemm::SmallM{});
  if (p.m <= 1024) return f(int8_gemm::MiddleM{});
  return f(int8_gemm::LargeM{});
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  Problem p;
  if (read_problem(call, &p) != 0) return 1;
  *bytes = dispatch(p, [&](auto kernel) { return workspace_of<decltype(kernel)>(p); });
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  Problem p;
  if (read_problem(call, &p) != 0) return 1;
  if (p.m == 0) return 0;
  return dispatch(p, [&](auto kernel) { return run<decltype(kernel)>(call, p); });
}
