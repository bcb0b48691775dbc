// Expert CUDA solution of quant/fp8_block_gemm for the H200 (sm_90a), on CUTLASS 4.2's sm90 collectives.
//
// C = sum over 128-wide K blocks of (A_blk B_blk^T) * sa[m, kb] * sb[n / 128, kb], bf16. The wgmma
// accumulator of one K block is promoted into an fp32 register sum with both scales (the mainloop's
// blockwise-scaling collective), so the tensor cores never see a scale and the result keeps DeepSeek-V3's
// per-block semantics. Small M reads each weight byte once and computes little: a weight stream whose
// output tiles are too few for 132 SMs unless K is split. For M <= 64 and a weight of at most 16 MiB,
// smallm_kernel.cuh's stream (each slab's K loop split across the CTAs of a cluster and reduced in its
// shared memory); for larger small-M weights, and as the stream's fallback, CUTLASS's stream-K kernel
// (gemm_kernels.cuh's SmallM).
// Large M is compute bound: 128 x 128 tiles, a 1 x 2 cluster multicasting the token tile, persistent CTAs
// (gemm_kernels.cuh's LargeM). This file checks the call, picks the kernel and runs it.
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
#include "smallm_kernel.cuh"

namespace {

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

struct Problem {
  const fp8_block_gemm::E4m3* a;
  const float* sa;
  const fp8_block_gemm::E4m3* b;
  const float* sb;
  fp8_block_gemm::Bf16* c;
  int m, n, k;
  int kb, nb;  // K / 128 and ceil(N / 128): the scale grids
  int sa_ld;   // sa's column stride (align(M, 4) in the task's layout)
};

bool row_major(const d2k_tensor& t) {
  return t.rank == 2 && (t.shape[1] == 1 || t.strides[1] == 1) && (t.shape[0] == 1 || t.strides[0] == t.shape[1]);
}

// Inputs a, sa, b, sb and output c, in the task's order. a, b, sb and c row-major; sa MN-major with a
// column stride that keeps every column 16-byte aligned (TMA loads a tile's token scales as one box).
int read_problem(const d2k_call* call, Problem* p) {
  if (call->num_inputs != 4 || call->num_outputs != 1)
    return fail(call, "quant/fp8_block_gemm: expected 4 inputs and 1 output, got %d and %d", call->num_inputs,
                call->num_outputs);
  const d2k_tensor* in = call->inputs;
  const d2k_tensor& c = call->outputs[0];
  const d2k_dtype want[4] = {D2K_FLOAT8_E4M3, D2K_FLOAT32, D2K_FLOAT8_E4M3, D2K_FLOAT32};
  for (int i = 0; i < 4; ++i) {
    if (in[i].dtype != want[i] || in[i].rank != 2)
      return fail(call, "quant/fp8_block_gemm: input %s has dtype %d and rank %d, expected dtype %d and rank 2", in[i].name,
                  in[i].dtype, in[i].rank, want[i]);
  }
  if (c.dtype != D2K_BFLOAT16 || !row_major(c)) return fail(call, "quant/fp8_block_gemm: output c must be row-major bf16");
  for (int i : {0, 2, 3})
    if (!row_major(in[i])) return fail(call, "quant/fp8_block_gemm: input %s is not row-major", in[i].name);
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[2].shape[0];
  const int64_t kb = k / fp8_block_gemm::kBlock, nb = (n + fp8_block_gemm::kBlock - 1) / fp8_block_gemm::kBlock;
  if (k % fp8_block_gemm::kBlock != 0 || n % 16 != 0)
    return fail(call, "quant/fp8_block_gemm: K = %lld must be a multiple of 128 and N = %lld of 16", (long long)k,
                (long long)n);
  if (in[2].shape[1] != k || in[1].shape[0] != m || in[1].shape[1] != kb || in[3].shape[0] != nb || in[3].shape[1] != kb ||
      c.shape[0] != m || c.shape[1] != n)
    return fail(call, "quant/fp8_block_gemm: shapes disagree (M %lld, N %lld, K %lld)", (long long)m, (long long)n,
                (long long)k);
  const int64_t sa_ld = kb == 1 ? ((m + 3) / 4) * 4 : in[1].strides[1];
  if ((m > 1 && in[1].strides[0] != 1) || sa_ld < m || sa_ld % 4 != 0)
    return fail(call,
                "quant/fp8_block_gemm: sa must be MN-major with a column stride that is a multiple of 4 and at least M "
                "(strides %lld, %lld for M %lld)",
                (long long)in[1].strides[0], (long long)in[1].strides[1], (long long)m);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || sa_ld * kb > INT32_MAX)
    return fail(call, "quant/fp8_block_gemm: an extent exceeds int32");
  *p = {static_cast<const fp8_block_gemm::E4m3*>(in[0].data),
        static_cast<const float*>(in[1].data),
        static_cast<const fp8_block_gemm::E4m3*>(in[2].data),
        static_cast<const float*>(in[3].data),
        static_cast<fp8_block_gemm::Bf16*>(c.data),
        static_cast<int>(m),
        static_cast<int>(n),
        static_cast<int>(k),
        static_cast<int>(kb),
        static_cast<int>(nb),
        static_cast<int>(sa_ld)};
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

// The token scales as CuTe sees them: ((1, M), (128, KB), 1) with strides ((0, 1), (0, ld), ld KB): one
// value per token, repeated over each 128-wide K block.
template <class L>
L token_scales(const Problem& p) {
  using namespace cute;
  return make_layout(make_shape(make_shape(_1{}, p.m), make_shape(Int<fp8_block_gemm::kBlock>{}, p.kb), 1),
                     make_stride(make_stride(_0{}, _1{}), make_stride(_0{}, p.sa_ld), p.sa_ld * p.kb));
}

// The weight scales: ((128, NB), (128, KB), 1) with strides ((0, KB), (0, 1), NB KB): sb row-major.
template <class L>
L weight_scales(const Problem& p) {
  using namespace cute;
  return make_layout(make_shape(make_shape(Int<fp8_block_gemm::kBlock>{}, p.nb), make_shape(Int<fp8_block_gemm::kBlock>{}, p.kb), 1),
                     make_stride(make_stride(_0{}, p.kb), make_stride(_0{}, _1{}), p.nb * p.kb));
}

template <class K>
typename K::Gemm::Arguments arguments_of(const Problem& p) {
  using Gemm = typename K::Gemm;
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  // Swapped: the weight is the first operand and C^T (N x M, column-major) the output.
  const int rows = K::swapped ? p.n : p.m, cols = K::swapped ? p.m : p.n;
  const auto* first = K::swapped ? p.b : p.a;
  const auto* second = K::swapped ? p.a : p.b;
  const float* first_scales = K::swapped ? p.sb : p.sa;
  const float* second_scales = K::swapped ? p.sa : p.sb;
  typename K::LayoutSFA layout_sfa;
  typename K::LayoutSFB layout_sfb;
  if constexpr (K::swapped) {
    layout_sfa = weight_scales<typename K::LayoutSFA>(p);
    layout_sfb = token_scales<typename K::LayoutSFB>(p);
  } else {
    layout_sfa = token_scales<typename K::LayoutSFA>(p);
    layout_sfb = weight_scales<typename K::LayoutSFB>(p);
  }
  const auto stride_a = packed<StrideA>(rows, p.k);  // K-major: (K, 1, rows K)
  const auto stride_b = packed<StrideB>(cols, p.k);
  const auto stride_d = packed<StrideD>(rows, cols);
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {rows, cols, p.k, 1},
                                {first, stride_a, second, stride_b, first_scales, layout_sfa, second_scales, layout_sfb},
                                {{}, nullptr, stride_d, p.c, stride_d}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
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
  // can_implement asks a TMA-loaded scale tensor's contiguous extent (M tokens) to be a multiple of 16
  // bytes, where TMA itself needs only the column stride aligned (align(M, 4) in the task's layout) and
  // fills the rows past M with zeros. Asked about M rounded up to 4 tokens, run with M: rounding the
  // run's M would read up to 3 scales past the end of sa's last column.
  Problem aligned = p;
  aligned.m = (p.m + 3) / 4 * 4;
  if (gemm.can_implement(arguments_of<K>(aligned)) != cutlass::Status::kSuccess)
    return fail(call, "quant/fp8_block_gemm: CUTLASS cannot run M %d N %d K %d with this kernel", p.m, p.n, p.k);
  if (K::Gemm::get_workspace_size(args) > call->workspace_bytes)
    return fail(call, "quant/fp8_block_gemm: the workspace holds %zu bytes, the kernel needs %zu", call->workspace_bytes,
                K::Gemm::get_workspace_size(args));
  auto stream = static_cast<cudaStream_t>(call->stream);
  // initialize() zeroes the stream-K flags in the workspace (the harness poisons it before every call).
  cutlass::Status status = gemm.initialize(args, call->workspace, stream);
  if (status == cutlass::Status::kSuccess) status = gemm.run(stream);
  if (status != cutlass::Status::kSuccess)
    return fail(call, "quant/fp8_block_gemm: CUTLASS failed: %s (%s)", cutlass::cutlassGetStatusString(status),
                cudaGetErrorString(cudaGetLastError()));
  return 0;
}

// The kernel for M: see gemm_kernels.cuh for why each.
template <class F>
auto dispatch(const Problem& p, F&& f) {
  if (p.m <= 64) return f(fp8_block_gemm::SmallM{});
  return f(fp8_block_gemm::LargeM{});
}

// M <= 64 with a weight of at most 16 MiB runs smallm_kernel.cuh's weight stream; larger weights, and
// operands the stream refuses (pointers not 16-byte aligned, no cluster plan the device launches), the
// CUTLASS stream-K kernel (SmallM). Measured on the H200 (notes.md): the stream has the smaller fixed cost
// and the lower rate per byte, so it wins where the weight is small (qkv_a 15 MB at M 64: 13.1 us against
// 21.6; 1 MB at M 3: 8.7 against 30.1). The threshold dates from the stream's first form (2026-12-03:
// shared_gate_up 22.5 against 21.4); the cluster form's probe (2026-12-04) puts shared_gate_up's 29 MB at
// about 18.4 us cold, so it would now win there too (not yet measured through the harness).
constexpr long long kStreamMaxWeightBytes = 16ll << 20;
bool stream_path(const Problem& p) {
  return p.m >= 1 && p.m <= 64 && static_cast<long long>(p.n) * p.k <= kStreamMaxWeightBytes;
}

bool stream_supported(const Problem& p) {
  return stream_path(p) && fp8_block_gemm::smallm::supports(p.a, p.sa, p.b, p.sb, p.c, p.m);
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
  if (stream_supported(p)) {
    const cudaError_t error = fp8_block_gemm::smallm::run(p.a, p.sa, p.b, p.sb, p.c, p.m, p.n, p.k, p.sa_ld,
                                                          static_cast<cudaStream_t>(call->stream));
    if (error == cudaSuccess) return 0;
    // Refused before launching (no cluster plan fits the device, a tensor map TMA does not take): the
    // CUTLASS path. A launch that failed is an error.
    if (error != cudaErrorInvalidValue)
      return fail(call, "quant/fp8_block_gemm: the small-M kernel failed to launch: %s", cudaGetErrorString(error));
    cudaGetLastError();
    static bool said = false;  // once per process: the trace's log says which path ran
    if (!said)
      std::fprintf(stderr, "quant/fp8_block_gemm: small-M kernel refused (%s); CUTLASS stream-K runs\n",
                   cudaGetErrorString(error));
    said = true;
  }
  return dispatch(p, [&](auto kernel) { return run<decltype(kernel)>(call, p); });
}
