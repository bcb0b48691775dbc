// Expert solution of quant/w4a16_gemm, version 3 (sm_90a): bf16 tensor cores for every M, wgmma from M 64.
//
// Two paths, chosen by M (and N) in d2k_run; d2k_prepare lays the weight out for both once.
// - M below kHopperMinM (decode, small batches): version 2. The int4 weight and the scales re-laid out
//   into the order in which mma.sync m16n8k16 consumes them (layout.cuh: one 16-byte load per lane gives
//   the B registers of 8 MMAs after the lop3 dequantization); a tile by M (gemm.cuh's kernel, three
//   configurations) and K split across CTAs where the tiles cannot fill the SMs; the split's partials meet
//   in the workspace and the last CTA of a tile adds them in split order (deterministic). The counters it
//   uses live in the prepared state, zeroed once and re-armed by every call.
// - M from kHopperMinM (prefill): CUTLASS's sm90 mixed-input GEMM on the swapped problem y^T = W^T x^T,
//   the weight re-coded to signed int4 and re-ordered for wgmma's register operand (hopper.cuh).
// Before any header: CUTLASS's device-side asserts are calls out of the kernel, and ptxas serializes every
// wgmma across such a call (warning C7510). The build sets no NDEBUG.
#ifndef NDEBUG
#define NDEBUG
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"
#include "gemm.cuh"
#include "hopper.cuh"
#include "layout.cuh"

namespace {

using namespace w4a16;

// M <= 16: one m16 block, 4 warps = 2 column blocks x 2 K halves of each 128-wide stage (4 k16 steps per
// warp per stage, so the loop's own instructions are shared by 4 of them); a weight stream, 4 stages
// of 12.25 KB, 4 CTAs per SM: 12 stages of 8 KB of weight in flight per SM, and 528 resident CTAs, so
// that even 70B gate_up's 448 column tiles run in one wave.
using Small = Config</*WM*/ 1, /*WN*/ 2, /*WK*/ 2, /*MB*/ 1, /*TK*/ 128, /*STAGES*/ 4, /*MIN_CTAS*/ 4>;
// M <= 128: 64 x 128 tiles, 8 warps = 2 row halves x 2 column blocks x 2 K halves.
using Medium = Config<2, 2, 2, 2, 128, 4, 2>;
// M > 128: 128 x 256 tiles, 8 warps = 2 row halves x 4 column blocks, each warp 64 x 64.
using Large = Config<2, 4, 1, 4, 64, 4, 1>;

constexpr int kCounters = 4096;

// From this many tokens on, the wgmma path (hopper.cuh). Below it a 128-channel x 128-token wgmma tile
// would be mostly padding and the work is close to reading the weight once (at M 64 a weight byte meets
// 256 FLOPs, near the H200's 185 FLOP/byte ridge), which version 2's weight stream does well (M 16:
// 60% of the speed of light); above it the mma.sync kernel is compute bound at about half of cuBLAS.
constexpr int kHopperMinM = 64;

struct Prepared {
  PreparedLayout layout;
  uint4* weight = nullptr;
  uint4* scales = nullptr;
  int* counters = nullptr;
  uint32_t* hopper_weight = nullptr;  // signed int4 in hopper::WeightLayout; null where that path cannot run
};

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int used = std::snprintf(call->error, D2K_ERROR_CAPACITY, "quant/w4a16_gemm (cuda): ");
  std::vsnprintf(call->error + used, D2K_ERROR_CAPACITY - used, format, args);
  va_end(args);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

struct Problem {
  const __nv_bfloat16* x;
  const uint32_t* qweight;
  const __nv_bfloat16* scales;
  __nv_bfloat16* y;
  int M, N, K;
};

int read_problem(const d2k_call* call, Problem* p) {
  const d2k_tensor* x = find(call->inputs, call->num_inputs, "x");
  const d2k_tensor* q = find(call->inputs, call->num_inputs, "qweight");
  const d2k_tensor* sc = find(call->inputs, call->num_inputs, "scales");
  const d2k_tensor* y = find(call->outputs, call->num_outputs, "y");
  if (!x || !q || !sc || !y) return fail(call, "missing one of the inputs x, qweight, scales or the output y");
  if (x->dtype != D2K_BFLOAT16 || q->dtype != D2K_INT32 || sc->dtype != D2K_BFLOAT16 || y->dtype != D2K_BFLOAT16)
    return fail(call, "expects bf16 x, int32 qweight, bf16 scales and bf16 y");
  const int64_t M = x->shape[0], K = x->shape[1], N = q->shape[1];
  if (K % kGroup != 0 || N % 8 != 0 || q->shape[0] != K / 8 || sc->shape[0] != K / kGroup || sc->shape[1] != N ||
      y->shape[0] != M || y->shape[1] != N)
    return fail(call,
                "shapes disagree: x [%lld, %lld], qweight [%lld, %lld], scales [%lld, %lld], y [%lld, %lld]; expects "
                "x [M, K] (K a multiple of 128), qweight [K/8, N] (N a multiple of 8), scales [K/128, N], y [M, N]",
                (long long)M, (long long)K, (long long)q->shape[0], (long long)N, (long long)sc->shape[0],
                (long long)sc->shape[1], (long long)y->shape[0], (long long)y->shape[1]);
  if (x->strides[1] != 1 || x->strides[0] != K || q->strides[1] != 1 || q->strides[0] != N || sc->strides[1] != 1 ||
      sc->strides[0] != N || y->strides[1] != 1 || y->strides[0] != N)
    return fail(call, "expects contiguous row-major x, qweight, scales and y");
  if (M < 1 || M > (int64_t)Large::TM * 65535 || N > INT32_MAX / 2 || K > INT32_MAX / 2 ||
      (int64_t)M * N > INT32_MAX * 2LL)
    return fail(call, "shape out of range: M %lld, N %lld, K %lld", (long long)M, (long long)N, (long long)K);
  *p = Problem{static_cast<const __nv_bfloat16*>(x->data), static_cast<const uint32_t*>(q->data),
               static_cast<const __nv_bfloat16*>(sc->data), static_cast<__nv_bfloat16*>(y->data),
               static_cast<int>(M), static_cast<int>(N), static_cast<int>(K)};
  return 0;
}

// The wgmma path needs whole 128-channel tiles (the re-ordered weight is read by TMA through its atoms;
// a partial channel tile is not worth the risk of a half-atom read: every model layer here has N a
// multiple of 128, and the smoke slices N 136 and 64 run at M < 64 anyway) and offsets in 32 bits.
bool hopper_shape(int N, int K) { return N % 128 == 0 && (int64_t)N * K < ((int64_t)1 << 31); }
bool use_hopper(const Problem& pr) { return pr.M >= kHopperMinM && hopper_shape(pr.N, pr.K); }

int sm_count() {
  static int count = 0;  // asked once: the stream-K scheduler sizes its grid by it
  if (count == 0) {
    int dev = 0;
    cudaGetDevice(&dev);
    count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(dev);
  }
  return count;
}

// The swapped problem's arguments: (M, N, K) = (channels, tokens, K); A the prepared weight with the
// call's scales ([K / 128, N] row-major: channel-major, as the collective wants), B = x, D = y^T.
template <class Kn>
typename Kn::Gemm::Arguments hopper_arguments(const Problem& pr, const uint32_t* weight) {
  using GemmKernel = typename Kn::GemmKernel;
  typename GemmKernel::StrideB stride_x{};  // (K, 1, M K)
  cute::get<0>(stride_x) = pr.K;
  cute::get<2>(stride_x) = (int64_t)pr.M * pr.K;
  typename GemmKernel::StrideD stride_y{};  // (1, N, N M)
  cute::get<1>(stride_y) = pr.N;
  cute::get<2>(stride_y) = (int64_t)pr.N * pr.M;
  typename Kn::CollectiveMainloop::StrideScale stride_s{};  // (1, N, N K / 128)
  cute::get<1>(stride_s) = pr.N;
  cute::get<2>(stride_s) = (int64_t)pr.N * (pr.K / kGroup);
  typename Kn::Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {pr.N, pr.M, pr.K, 1},
      {reinterpret_cast<const hopper::Int4*>(weight), hopper::weight_layout(pr.N, pr.K),
       reinterpret_cast<const hopper::Bf16*>(pr.x), stride_x, reinterpret_cast<const hopper::Bf16*>(pr.scales), stride_s,
       kGroup},
      {{1.0f, 0.0f}, nullptr, stride_y, reinterpret_cast<hopper::Bf16*>(pr.y), stride_y}};
  if constexpr (Kn::kAlwaysSplit)
    args.scheduler.decomposition_mode = cutlass::gemm::kernel::detail::DecompositionMode::StreamK;
  cudaGetDevice(&args.hw_info.device_id);
  args.hw_info.sm_count = sm_count();
  return args;
}

// The wgmma kernel by M (hopper.cuh says why each).
template <class F>
auto hopper_dispatch(const Problem& pr, F&& f) {
  if (pr.M <= 256) return f(hopper::Mid{});
  return f(hopper::Large{});
}

template <class Kn>
int hopper_run(const d2k_call* call, const Problem& pr, const uint32_t* weight) {
  typename Kn::Gemm gemm;
  auto args = hopper_arguments<Kn>(pr, weight);
  if (gemm.can_implement(args) != cutlass::Status::kSuccess)
    return fail(call, "CUTLASS cannot run M %d, N %d, K %d with the %d-token tile", pr.M, pr.N, pr.K, Kn::kTileTokens);
  const size_t need = Kn::Gemm::get_workspace_size(args);
  if (need > 0 && (!call->workspace || call->workspace_bytes < need))
    return fail(call, "workspace of %zu bytes, smaller than the %zu d2k_workspace_size asked for", call->workspace_bytes, need);
  auto stream = static_cast<cudaStream_t>(call->stream);
  // initialize() zeroes the stream-K flags in the workspace (poisoned before every call) and builds the
  // TMA descriptors for this call's addresses.
  cutlass::Status status = gemm.initialize(args, call->workspace, stream);
  if (status == cutlass::Status::kSuccess) status = gemm.run(stream);
  if (status != cutlass::Status::kSuccess)
    return fail(call, "CUTLASS: %s (%s)", cutlass::cutlassGetStatusString(status), cudaGetErrorString(cudaGetLastError()));
  return 0;
}

// A configuration's kernel, its shared memory set up once, and how many of its CTAs an SM holds.
struct KernelInfo {
  void (*kernel)(GemmParams);
  int threads, smem, tm, tn, tk, ctas_per_sm;
};

template <class C>
cudaError_t kernel_info(KernelInfo* info) {
  *info = KernelInfo{w4a16_mma<C>, C::kThreads, C::kSmemBytes, C::TM, C::TN, C::TK, 0};
  cudaError_t err = cudaFuncSetAttribute(w4a16_mma<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes);
  if (err != cudaSuccess) return err;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, w4a16_mma<C>, C::kThreads, C::kSmemBytes);
}

struct Device {
  int sms = 0;
  KernelInfo small, medium, large;
};

// Queried once per process (the worker runs one device).
cudaError_t device(const Device** out) {
  static Device d;
  static cudaError_t status = [] {
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev);
    if (err == cudaSuccess) err = kernel_info<Small>(&d.small);
    if (err == cudaSuccess) err = kernel_info<Medium>(&d.medium);
    if (err == cudaSuccess) err = kernel_info<Large>(&d.large);
    return err;
  }();
  *out = &d;
  return status;
}

struct Plan {
  const KernelInfo* kernel;
  dim3 grid;
  int iters_per_split;
  size_t workspace_bytes;
};

// The tile by M; K split so that the CTAs fill the SMs' resident slots once (never more: a partial
// second wave would run with a fraction of the bytes in flight).
int plan(const d2k_call* call, const Problem& pr, Plan* out) {
  const Device* d = nullptr;
  if (cudaError_t err = device(&d); err != cudaSuccess) return fail(call, "device query: %s", cudaGetErrorString(err));
  const KernelInfo* k = pr.M <= Small::TM ? &d->small : pr.M <= 2 * Medium::TM ? &d->medium : &d->large;
  if (k->ctas_per_sm < 1) return fail(call, "a kernel of %d threads and %d bytes of shared memory does not fit an SM", k->threads, k->smem);
  const int tiles_n = (pr.N + k->tn - 1) / k->tn, tiles_m = (pr.M + k->tm - 1) / k->tm;
  const int64_t tiles = (int64_t)tiles_n * tiles_m;
  const int iters = pr.K / k->tk;
  const int64_t slots = (int64_t)d->sms * k->ctas_per_sm;
  int splits = tiles >= slots ? 1 : (int)std::min<int64_t>(iters, std::max<int64_t>(1, slots / tiles));
  const int per = (iters + splits - 1) / splits;
  splits = (iters + per - 1) / per;  // no empty split
  if (splits > 1 && tiles > kCounters) return fail(call, "%lld tiles exceed the %d split counters", (long long)tiles, kCounters);
  *out = Plan{k, dim3(tiles_n, tiles_m, splits), per, splits > 1 ? sizeof(float) * splits * pr.M * (size_t)pr.N : 0};
  return 0;
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  Problem pr;
  if (read_problem(call, &pr) != 0) return 1;
  if (use_hopper(pr)) {
    *bytes = hopper_dispatch(pr, [&](auto kn) {
      using Kn = decltype(kn);
      return Kn::Gemm::get_workspace_size(hopper_arguments<Kn>(pr, nullptr));
    });
    return 0;
  }
  Plan pl;
  if (plan(call, pr, &pl) != 0) return 1;
  *bytes = pl.workspace_bytes;
  return 0;
}

extern "C" void d2k_release(void* prepared) {
  auto* p = static_cast<Prepared*>(prepared);
  if (!p) return;
  cudaFree(p->weight);
  cudaFree(p->scales);
  cudaFree(p->counters);
  cudaFree(p->hopper_weight);
  delete p;
}

// Re-lays qweight and scales out for version 2 (layout.cuh) and, where the shape allows, qweight for the
// wgmma path (hopper.cuh), whatever M: both are the weight's own size in int4. x holds poison here and
// is not read.
extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  Problem pr;
  if (read_problem(call, &pr) != 0) return 1;
  auto* p = new Prepared;
  p->layout = PreparedLayout::of(pr.N, pr.K);
  auto stream = static_cast<cudaStream_t>(call->stream);
  cudaError_t err = cudaMalloc(&p->weight, p->layout.weight_bytes());
  if (err == cudaSuccess) err = cudaMalloc(&p->scales, p->layout.scale_bytes());
  if (err == cudaSuccess) err = cudaMalloc(&p->counters, kCounters * sizeof(int));
  if (err == cudaSuccess) err = cudaMemsetAsync(p->counters, 0, kCounters * sizeof(int), stream);
  if (err == cudaSuccess) {
    prepare_weight<<<1024, 256, 0, stream>>>(pr.qweight, p->layout, reinterpret_cast<uint32_t*>(p->weight));
    prepare_scales<<<256, 256, 0, stream>>>(pr.scales, p->layout, reinterpret_cast<__nv_bfloat16*>(p->scales));
    err = cudaGetLastError();
  }
  if (err == cudaSuccess && hopper_shape(pr.N, pr.K)) {
    const size_t bytes = (size_t)pr.N * pr.K / 2;
    err = cudaMalloc(&p->hopper_weight, bytes);
    if (err == cudaSuccess) err = cudaMemsetAsync(p->hopper_weight, 0, bytes, stream);
    if (err == cudaSuccess) {
      hopper::prepare_weight<<<1024, 256, 0, stream>>>(pr.qweight, pr.N, pr.K, hopper::weight_layout(pr.N, pr.K),
                                                       p->hopper_weight);
      err = cudaGetLastError();
    }
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    d2k_release(p);
    return fail(call, "prepare: %s", cudaGetErrorString(err));
  }
  *prepared = p;
  return 0;
}

extern "C" int d2k_run(const d2k_call* call) {
  Problem pr;
  if (read_problem(call, &pr) != 0) return 1;
  const auto* p = static_cast<const Prepared*>(call->prepared);
  if (!p) return fail(call, "call->prepared is NULL: d2k_prepare did not run");
  if (p->layout.N != pr.N || p->layout.K != pr.K)
    return fail(call, "prepared for N %d, K %d but called with N %d, K %d", p->layout.N, p->layout.K, pr.N, pr.K);
  if (use_hopper(pr)) {
    if (!p->hopper_weight) return fail(call, "the wgmma path's weight was not prepared (N %d, K %d)", pr.N, pr.K);
    return hopper_dispatch(pr, [&](auto kn) { return hopper_run<decltype(kn)>(call, pr, p->hopper_weight); });
  }
  Plan pl;
  if (plan(call, pr, &pl) != 0) return 1;
  if (pl.workspace_bytes > 0 && (!call->workspace || call->workspace_bytes < pl.workspace_bytes))
    return fail(call, "workspace of %zu bytes, smaller than the %zu d2k_workspace_size asked for", call->workspace_bytes,
                pl.workspace_bytes);
  GemmParams gp{pr.x, p->weight, p->scales, pr.y, static_cast<float*>(call->workspace), p->counters,
                pr.M, pr.N, pr.K, p->layout.NB, pl.iters_per_split};
  pl.kernel->kernel<<<pl.grid, pl.kernel->threads, pl.kernel->smem, static_cast<cudaStream_t>(call->stream)>>>(gp);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return fail(call, "launch: %s", cudaGetErrorString(err));
  return 0;
}
