// Version 3's large-M path: CUTLASS 4.2's sm90 mixed-input GEMM (TMA, warp-specialized, wgmma with the
// int4 weight converted to bf16 in registers), composed from the public collective builders.
//
// The problem is swapped: y^T [N, M] = W^T [N, K] . x^T [K, M]. wgmma takes its register operand only as
// A, and the operand that is converted in registers (the int4 weight) must be that one; CUTLASS would
// swap implicitly, but then it cannot use its TMA epilogue, so the swap is explicit (as CUTLASS's
// example 55 does): the GEMM's M extent is the task's N (output channels, tiles of 128 = two warpgroups
// of 64 rows), its N extent the task's M (tokens, tiles of 128 or 256), K-major operands on both sides.
// The output y^T is column-major [N, M]: the same bytes as y [M, N] row-major.
//
// The weight is re-coded and re-laid out once, in d2k_prepare:
// - codes: AutoGPTQ's unsigned q with zero point 8 becomes cutlass::int4b_t (two's complement) q - 8,
//   which is q ^ 8 in four bits; the scale multiplies it as CUTLASS's ConvertAndScale mode does
//   (bf16 * bf16 rounded once to bf16: the task's "w rounded to bf16 once"), fp32 accumulation;
// - order: `WarpAtom` below, 16 channels x 16 K values per 128-byte atom, places the 8 codes that one
//   thread of a warp holds in wgmma's A fragment next to each other (one 32-bit shared load instead of
//   four 8-bit ones), in the value order 0 2 4 6 1 3 5 7 for which CUTLASS converts 8 codes with 4 lop3 +
//   4 bf16x2 subtractions (LayoutAwareConvertImpl<int4b_t, bfloat16_t, (2,4):(4,1)>). Atoms tile the
//   [N, K] weight channel-block-fastest (cute::tile_to_shape's default order).
// The scales need no re-layout: [K / 128, N] row-major is the (N, K / 128) channel-major layout the
// collective reads with TMA, one bf16 per channel per 64-wide K tile.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/integer_subbyte.h>

#include <cstdint>

namespace w4a16::hopper {

using Bf16 = cutlass::bfloat16_t;
using Int4 = cutlass::int4b_t;

// One warp's 16 x 16 slice of the A operand of wgmma m64nNk16 (bf16, from registers): lane l = 4g + c
// holds rows g and g + 8, K values 2c, 2c + 1, 2c + 8, 2c + 9, as values v = j + 2h + 4kh for
// (row g + 8h, K 2c + j + 8kh). The atom stores lane l's values at 8l + (4j + h + 2kh): 8 codes per lane
// contiguous (32 bits), in the value order 0 2 4 6 1 3 5 7. As a CuTe layout of (channel, K):
//   channel = g + 8h        -> 32g + h
//   K       = j + 2c + 8kh  -> 4j + 8c + 2kh
using WarpAtom = cute::Layout<cute::Shape<cute::Shape<cute::_8, cute::_2>, cute::Shape<cute::_2, cute::_4, cute::_2>>,
                              cute::Stride<cute::Stride<cute::_32, cute::_1>, cute::Stride<cute::_4, cute::_8, cute::_2>>>;
constexpr int kAtomRows = 16, kAtomK = 16;

// The whole weight, (N, K, 1) -> offset in codes: the atoms tiled channel-block-fastest.
using WeightLayout = decltype(cute::tile_to_shape(WarpAtom{}, cute::make_shape(int{}, int{}, int{})));
inline WeightLayout weight_layout(int N, int K) { return cute::tile_to_shape(WarpAtom{}, cute::make_shape(N, K, 1)); }

// d2k_prepare: one thread per AutoGPTQ word (8 codes of one channel along K). Each code goes, re-coded to
// two's complement q - 8 (= q ^ 8), to the nibble the layout gives it; the nibbles of one 32-bit word
// come from different threads, hence atomicOr into a zeroed buffer (not timed).
__global__ void prepare_weight(const uint32_t* __restrict__ qweight, int N, int K, WeightLayout layout,
                               uint32_t* __restrict__ out) {
  const size_t words = (size_t)(K / 8) * N;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
    const int n = (int)(i % N), k0 = (int)(i / N) * 8;
    const uint32_t word = qweight[i];
    for (int j = 0; j < 8; ++j) {
      const uint32_t code = ((word >> (4 * j)) & 15u) ^ 8u;
      const int64_t offset = layout(n, k0 + j, 0);
      atomicOr(&out[offset / 8], code << (4 * (offset % 8)));
    }
  }
}

// The kernel for one tile shape (stream-K scheduler in both; `AlwaysSplit`: split the K loops over all
// SMs whenever the tiles leave some idle, where CUTLASS's heuristic would run a wave of whole tiles that
// is more than half full, e.g. 80 tiles on 132 SMs). A: the weight (int4 with bf16 scales,
// `WeightLayout`), B: x (bf16, K-major: CUTLASS's ColumnMajor B), D: y^T column-major, no C (beta 0:
// D = bf16(acc), one rounding of the fp32 sum).
template <class Tile, class Cluster, bool AlwaysSplit>
struct Kernel {
  using Scheduler = cutlass::gemm::StreamKScheduler;
  static constexpr bool kAlwaysSplit = AlwaysSplit;
  using LayoutD = cutlass::layout::ColumnMajor;
  using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, void, LayoutD, 8, Bf16, LayoutD, 8, EpilogueSchedule>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cute::tuple<Int4, Bf16>, WeightLayout, 32, Bf16,
      cutlass::layout::ColumnMajor, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      Schedule>::CollectiveOp;

  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  static constexpr int kTileTokens = cute::size<1>(Tile{});
};

using namespace cute;  // the _N constants of the tile shapes

// M up to 256 tokens: 128 channels x 128 tokens x 64 K. At M 128 the 4096-, 6144-, 8192- and 10240-channel
// layers have 32 to 80 output tiles for 132 SMs: stream-K hands each SM an equal share of the K
// iterations of all tiles (fp32 partials in the workspace, added in a fixed order: CUTLASS's default
// deterministic reduction), always (`AlwaysSplit`).
using Mid = Kernel<Shape<_128, _128, _64>, Shape<_1, _1, _1>, true>;

// More tokens: 128 x 256 tiles (each consumer warpgroup 64 channels x 256 tokens, the widest wgmma), so
// that each converted weight fragment feeds 256 tokens. CUTLASS's heuristic: whole tiles, stream-K only
// for a last wave less than half full (8B qkv at M 1024: 48 x 4 = 192 tiles on 132 SMs). A 2 x 1
// cluster multicasting x's tile was measured no faster (70B gate_up M1024: L2 at 52%, the SM the limit).
using Large = Kernel<Shape<_128, _256, _64>, Shape<_1, _1, _1>, false>;

}  // namespace w4a16::hopper
