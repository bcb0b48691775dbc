// Expert CUDA solution of optim/muon_newton_schulz for the H200 (sm_90a), on CUTLASS 4.2's sm90 collectives.
//
// Per matrix of the batch: X = bf16(G) / (||bf16(G)||_F + 1e-7), then five steps A = X X^T, B = b A + c A A,
// X = a X + B X. The work is 15 bf16 GEMMs; everything else is one read of G and one write of x. So:
//   - the norm: a deterministic two-pass reduction (per-block partial sums of squares, then every block of
//     the scaling kernel adds the partials of its matrix in the same order) and one pass that writes the
//     normalized bf16 X into the workspace;
//   - each combination is its GEMM's epilogue (alpha acc + beta C in fp32, one rounding): no elementwise
//     kernel and no extra pass over A, B or X;
//   - X keeps the input's layout, [R, C] row-major, through every step; when R > C it is Y = X^T and the
//     products are taken with the operands' majors swapped (gemm_kernels.cuh), so nothing is transposed;
//   - every batch of matrices is one batched GEMM (L = B).
// Extents that are not multiples of 8 (TMA needs 16-byte rows) are padded with zeros in the workspace: the
// padding rows and columns of X, A and B stay exactly zero through the iteration, and a last copy writes the
// unpadded result.
// Before any header: CUTLASS's device-side asserts are calls out of the kernel, and ptxas serializes every
// wgmma across such a call (warning C7510: the mainloop loses its MMA overlap). The build sets no NDEBUG.
#ifndef NDEBUG
#define NDEBUG
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "d2k/solution.h"
#include "gemm_kernels.cuh"

namespace {

constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
constexpr float kEps = 1e-7f;
constexpr int kSteps = 5;
constexpr int kThreads = 256;
constexpr int kPartials = 128;  // partial sums of squares per matrix (blocks of the first pass)

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

int64_t align8(int64_t v) { return (v + 7) / 8 * 8; }
size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// The call's shapes and where each buffer lives in the workspace.
struct Plan {
  const float* g;
  __nv_bfloat16* x;
  int64_t batch, R, C;
  bool tall;         // R > C: the iteration runs on Y = X^T, which is G's own layout
  int64_t m, n;      // min(R, C), max(R, C)
  int64_t Rp, Cp;    // R and C padded to multiples of 8: the stored X is [Rp, Cp] row-major
  int64_t mp;        // m padded: A and B are [mp, mp] row-major
  bool direct;       // no padding: the last step writes x itself
  size_t partials_at, x_at[2], a_at, b_at, bytes;
};

bool contiguous(const d2k_tensor& t) {
  int64_t expected = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

int make_plan(const d2k_call* call, Plan* p) {
  if (call->num_inputs != 1 || call->num_outputs != 1)
    return fail(call, "optim/muon_newton_schulz: expected 1 input and 1 output, got %d and %d", call->num_inputs,
                call->num_outputs);
  const d2k_tensor& g = call->inputs[0];
  const d2k_tensor& x = call->outputs[0];
  if (g.dtype != D2K_FLOAT32 || g.rank != 3 || !contiguous(g))
    return fail(call, "optim/muon_newton_schulz: input g must be a contiguous fp32 [B, R, C] tensor (dtype %d, rank %d)",
                g.dtype, g.rank);
  if (x.dtype != D2K_BFLOAT16 || x.rank != 3 || !contiguous(x) || x.shape[0] != g.shape[0] || x.shape[1] != g.shape[1] ||
      x.shape[2] != g.shape[2])
    return fail(call, "optim/muon_newton_schulz: output x must be a contiguous bf16 tensor of g's shape");
  p->g = static_cast<const float*>(g.data);
  p->x = static_cast<__nv_bfloat16*>(x.data);
  p->batch = g.shape[0];
  p->R = g.shape[1];
  p->C = g.shape[2];
  if (p->R > INT32_MAX / 2 || p->C > INT32_MAX / 2 || p->batch > INT32_MAX)
    return fail(call, "optim/muon_newton_schulz: an extent exceeds int32");
  p->tall = p->R > p->C;
  p->m = p->tall ? p->C : p->R;
  p->n = p->tall ? p->R : p->C;
  p->Rp = align8(p->R);
  p->Cp = align8(p->C);
  p->mp = align8(p->m);
  p->direct = p->Rp == p->R && p->Cp == p->C;
  size_t at = 0;
  p->partials_at = at;
  at += align256(sizeof(float) * kPartials * p->batch);
  for (int i = 0; i < 2; ++i) {
    p->x_at[i] = at;
    at += align256(sizeof(__nv_bfloat16) * p->batch * p->Rp * p->Cp);
  }
  p->a_at = at;
  at += align256(sizeof(__nv_bfloat16) * p->batch * p->mp * p->mp);
  p->b_at = at;
  at += align256(sizeof(__nv_bfloat16) * p->batch * p->mp * p->mp);
  p->bytes = at;
  return 0;
}

__device__ float block_sum(float v) {
  __shared__ float warps[kThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += warps[w];  // the same order in every thread
  return total;
}

// Pass 1: partials[b][blockIdx.x] = the sum of squares of bf16(g) over this block's share of matrix b.
__global__ void __launch_bounds__(kThreads) sum_squares(const float* __restrict__ g, float* __restrict__ partials,
                                                        int64_t elements) {
  const float* matrix = g + blockIdx.y * elements;
  float acc = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < elements; i += int64_t{kPartials} * kThreads) {
    const float v = __bfloat162float(__float2bfloat16_rn(matrix[i]));
    acc = fmaf(v, v, acc);
  }
  const float total = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.y * kPartials + blockIdx.x] = total;
}

// Pass 2: X0[b] = bf16(bf16(g) / d) with d = bf16(bf16(sqrt(sum)) + 1e-7), as the eager bf16 ops round; the
// padding (rows R..Rp, columns C..Cp) written as zeros. Every block adds its matrix's partials in one order.
__global__ void __launch_bounds__(kThreads) normalize(const float* __restrict__ g, const float* __restrict__ partials,
                                                      __nv_bfloat16* __restrict__ x0, int64_t R, int64_t C, int64_t Rp,
                                                      int64_t Cp) {
  __shared__ float denominator;
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int i = 0; i < kPartials; ++i) sum += partials[blockIdx.y * kPartials + i];
    const float norm = __bfloat162float(__float2bfloat16_rn(sqrtf(sum)));
    denominator = __bfloat162float(__float2bfloat16_rn(norm + kEps));
  }
  __syncthreads();
  const float d = denominator;
  const float* matrix = g + blockIdx.y * R * C;
  __nv_bfloat16* out = x0 + blockIdx.y * Rp * Cp;
  const int64_t padded = Rp * Cp;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < padded; i += int64_t{gridDim.x} * kThreads) {
    const int64_t r = i / Cp, c = i % Cp;
    float v = 0.0f;
    if (r < R && c < C) v = __bfloat162float(__float2bfloat16_rn(matrix[r * C + c])) / d;
    out[i] = __float2bfloat16_rn(v);
  }
}

// The padded result back into x [B, R, C].
__global__ void __launch_bounds__(kThreads) unpad(const __nv_bfloat16* __restrict__ from, __nv_bfloat16* __restrict__ x,
                                                  int64_t R, int64_t C, int64_t Rp, int64_t Cp) {
  const __nv_bfloat16* in = from + blockIdx.y * Rp * Cp;
  __nv_bfloat16* out = x + blockIdx.y * R * C;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < R * C; i += int64_t{gridDim.x} * kThreads)
    out[i] = in[(i / C) * Cp + i % C];
}

int sm_count() {
  static int count = 0;  // the device's SM count, asked once: the persistent scheduler sizes its grid by it
  if (count == 0) {
    int device = 0;
    cudaGetDevice(&device);
    count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
  }
  return count;
}

// A CuTe stride (rows or columns, the other, batch) with leading dimension ld: the static 1 stays where the
// type puts it.
template <class S>
S strided(int64_t ld, int64_t batch) {
  S s{};
  if constexpr (cute::is_static_v<decltype(cute::get<0>(s))>) {
    cute::get<1>(s) = ld;
  } else {
    cute::get<0>(s) = ld;
  }
  cute::get<2>(s) = batch;
  return s;
}

// One operand: pointer, leading dimension, batch stride (elements).
struct Operand {
  const cutlass::bfloat16_t* data;
  int64_t ld, batch;
};

// D = alpha (A B) + beta C over (M, N, K, L), in GEMM type G. `workspace_only`: say how many bytes it needs.
template <class G>
struct Call {
  int M, N, K, L;
  Operand a, b, c;
  cutlass::bfloat16_t* d;
  int64_t ldd, batch_d;
  float alpha, beta;

  typename G::Adapter::Arguments arguments() const {
    using Kernel = typename G::Kernel;
    typename G::Adapter::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {M, N, K, L},
        {a.data, strided<typename Kernel::StrideA>(a.ld, a.batch), b.data, strided<typename Kernel::StrideB>(b.ld, b.batch)},
        {{}, c.data, strided<typename Kernel::StrideC>(c.ld, c.batch), d, strided<typename Kernel::StrideD>(ldd, batch_d)}};
    if constexpr (G::kMirror) {
      // The tree's arguments, children before their node: {{beta, C, {alpha, acc, *}, fma}, mirror store}.
      args.epilogue.thread = {{{{beta}, {nullptr}, {}}, {}, {{{alpha}, {nullptr}, {}}, {}, {}}, {}},
                              {d, typename G::MirrorStride{cute::_1{}, ldd, batch_d}}};
    } else {
      args.epilogue.thread.alpha = alpha;
      args.epilogue.thread.beta = beta;
    }
    args.hw_info.device_id = 0;
    cudaGetDevice(&args.hw_info.device_id);
    args.hw_info.sm_count = sm_count();
    return args;
  }

  int run(const d2k_call* call, cudaStream_t stream) const {
    typename G::Adapter gemm;
    auto args = arguments();
    if (gemm.can_implement(args) != cutlass::Status::kSuccess)
      return fail(call, "optim/muon_newton_schulz: CUTLASS cannot run the GEMM M %d N %d K %d L %d", M, N, K, L);
    if (G::Adapter::get_workspace_size(args) != 0)
      return fail(call, "optim/muon_newton_schulz: the GEMM asks for %zu bytes of workspace, none planned",
                  G::Adapter::get_workspace_size(args));
    cutlass::Status status = gemm.initialize(args, nullptr, stream);
    if (status == cutlass::Status::kSuccess) status = gemm.run(stream);
    if (status != cutlass::Status::kSuccess)
      return fail(call, "optim/muon_newton_schulz: CUTLASS failed: %s (%s)", cutlass::cutlassGetStatusString(status),
                  cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
};

int launched(const d2k_call* call, const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return fail(call, "optim/muon_newton_schulz: %s failed to launch: %s", what, cudaGetErrorString(e));
  return 0;
}

int run(const d2k_call* call, const Plan& p) {
  auto stream = static_cast<cudaStream_t>(call->stream);
  auto* base = static_cast<char*>(call->workspace);
  auto* partials = reinterpret_cast<float*>(base + p.partials_at);
  cutlass::bfloat16_t* xs[2] = {reinterpret_cast<cutlass::bfloat16_t*>(base + p.x_at[0]),
                                reinterpret_cast<cutlass::bfloat16_t*>(base + p.x_at[1])};
  auto* A = reinterpret_cast<cutlass::bfloat16_t*>(base + p.a_at);
  auto* Bm = reinterpret_cast<cutlass::bfloat16_t*>(base + p.b_at);
  const int L = static_cast<int>(p.batch);

  sum_squares<<<dim3(kPartials, L), kThreads, 0, stream>>>(p.g, partials, p.R * p.C);
  if (launched(call, "sum_squares")) return 1;
  const int64_t blocks = std::min<int64_t>((p.Rp * p.Cp + kThreads - 1) / kThreads, 4 * sm_count());
  normalize<<<dim3(static_cast<unsigned>(blocks), L), kThreads, 0, stream>>>(
      p.g, partials, reinterpret_cast<__nv_bfloat16*>(xs[0]), p.R, p.C, p.Rp, p.Cp);
  if (launched(call, "normalize")) return 1;

  // Padded extents: m and n as the GEMMs see them; X is stored [Rp, Cp] (the input's layout), ld Cp.
  const int m = static_cast<int>(p.tall ? p.Cp : p.Rp), n = static_cast<int>(p.tall ? p.Rp : p.Cp);
  const int64_t ldx = p.Cp, batch_x = p.Rp * p.Cp, lda = p.mp, batch_a = p.mp * p.mp;
  if (muon::triangle_units(m, L, muon::TriangleTN::kTileRows) > INT32_MAX)
    return fail(call, "optim/muon_newton_schulz: %d matrices of %d x %d give more triangle tiles than the scheduler counts",
                L, m, m);
  for (int step = 0; step < kSteps; ++step) {
    cutlass::bfloat16_t* in = xs[step % 2];
    const bool last = step == kSteps - 1;
    cutlass::bfloat16_t* out = last && p.direct ? reinterpret_cast<cutlass::bfloat16_t*>(p.x) : xs[(step + 1) % 2];
    const Operand X{in, ldx, batch_x}, Am{A, lda, batch_a}, Bop{Bm, lda, batch_a};
    int rc = 0;
    // A = X X^T (or Y^T Y), alpha 1, beta 0 (C is never read): the upper triangle of tiles, mirrored.
    if (!p.tall)
      rc = Call<muon::TriangleTN>{m, m, n, L, X, X, Am, A, lda, batch_a, 1.0f, 0.0f}.run(call, stream);
    else
      rc = Call<muon::TriangleNT>{m, m, n, L, X, X, Am, A, lda, batch_a, 1.0f, 0.0f}.run(call, stream);
    if (rc) return rc;
    // B = c (A A) + b A, symmetric too: its upper triangle, mirrored; A's rows serve as the K-major second
    // operand (A is symmetric).
    rc = Call<muon::TriangleTN>{m, m, m, L, Am, Am, Am, Bm, lda, batch_a, kC, kB}.run(call, stream);
    if (rc) return rc;
    // X' = (B X) + a X, or Y' = (Y B) + a Y with B symmetric read K-major.
    if (!p.tall)
      rc = Call<muon::GemmTT>{m, n, m, L, Bop, X, X, out, ldx, batch_x, 1.0f, kA}.run(call, stream);
    else
      rc = Call<muon::GemmTN>{n, m, m, L, X, Bop, X, out, ldx, batch_x, 1.0f, kA}.run(call, stream);
    if (rc) return rc;
  }
  if (!p.direct) {
    const int64_t unpad_blocks = std::min<int64_t>((p.R * p.C + kThreads - 1) / kThreads, 4 * sm_count());
    unpad<<<dim3(static_cast<unsigned>(unpad_blocks), L), kThreads, 0, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(xs[kSteps % 2]), p.x, p.R, p.C, p.Rp, p.Cp);
    if (launched(call, "unpad")) return 1;
  }
  return 0;
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  Plan p;
  if (make_plan(call, &p) != 0) return 1;
  *bytes = p.bytes;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  Plan p;
  if (make_plan(call, &p) != 0) return 1;
  if (call->workspace_bytes < p.bytes)
    return fail(call, "optim/muon_newton_schulz: the workspace holds %zu bytes, the plan needs %zu", call->workspace_bytes,
                p.bytes);
  if (p.batch == 0 || p.R == 0 || p.C == 0) return 0;
  return run(call, p);
}
