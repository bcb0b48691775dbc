// The three CUTLASS kernel types of quant/int8_gemm's expert, composed from CUTLASS 4.2's public sm90
// builders: a TMA warp-specialized int8 mainloop (wgmma with int32 accumulators) and an epilogue visitor
// tree that applies the row scale, the column scale and the bias in fp32 and rounds once to bf16.
//
//   D[m, n] = bf16( s_a[m] * (s_b[n] * float(acc[m, n])) + float(bias[n]) )
//
// Both operands are K-major (A [M, K] and B [N, K] row-major): the only layout int8 wgmma reads from
// shared memory. `Swapped` kernels compute D^T = B A^T, so that a small M becomes the wgmma N extent
// (8..256 in steps of 8) instead of padding it to the 64-row minimum of a warpgroup's M.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

namespace int8_gemm {

using cute::Shape;
using cute::Stride;
using cute::_0;
using cute::_1;
using Bf16 = cutlass::bfloat16_t;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

// One value per row of the (possibly swapped) problem, or one per column, broadcast over the tile.
template <class Tile, class Element>
using PerRow = cutlass::epilogue::fusion::Sm90ColBroadcast<0, Tile, Element, float, Stride<_1, _0, _0>>;
template <class Tile, class Element>
using PerCol = cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tile, Element, float, Stride<_0, _1, _0>>;

// s_a (per token) and s_b, bias (per output channel), on whichever side of the problem they live. The
// order of the fp32 operations is the same either way: t = s_b * acc, then fma(s_a, t, bias), rounded once.
template <class Tile, bool Swapped>
struct Epilogue {
  template <class Element>
  using Token = std::conditional_t<Swapped, PerCol<Tile, Element>, PerRow<Tile, Element>>;
  template <class Element>
  using Channel = std::conditional_t<Swapped, PerRow<Tile, Element>, PerCol<Tile, Element>>;

  using ScaleTimesAcc =
      cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>,
                                         Channel<float>, cutlass::epilogue::fusion::Sm90AccFetch>;
  using Tree = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<cutlass::homogeneous_multiply_add, Bf16, float, kRound>, Token<float>,
      ScaleTimesAcc, Channel<Bf16>>;

  // Arguments in the tree's order: the token scale, then (channel scale, accumulator), then the bias.
  static typename Tree::Arguments arguments(const float* s_a, const float* s_b, const Bf16* bias) {
    return {{s_a}, {{s_b}, {}, {}}, {bias}, {}};
  }
};

// A GEMM over K-major int8 operands. Unswapped: (M, N, K) with D row-major. Swapped: (N, M, K), the weight
// as the first operand, D^T column-major (the same memory as D row-major).
template <class Tile, class Cluster, class MainloopSchedule, class EpilogueSchedule, class Scheduler, bool Swapped>
struct Kernel {
  static constexpr bool swapped = Swapped;
  using LayoutD = std::conditional_t<Swapped, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using Fusion = Epilogue<Tile, Swapped>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      int32_t, float, void, LayoutD, 8, Bf16, LayoutD, 8, EpilogueSchedule, typename Fusion::Tree>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor, 16, int8_t,
      cutlass::layout::ColumnMajor, 16, int32_t, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
                                                          Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

using namespace cute;  // the _N integer constants of the tile shapes below

// Small M (decode, M <= 64): bound by reading the weight once. Swapped, so the 128-row wgmma runs over
// output channels and the tokens fill a 64-wide N; stream-K spreads the K loop of the few output tiles
// over every SM (N 4096 gives 32 tiles for 132 SMs), its partial sums exact in int32.
using SmallM = Kernel<Shape<_128, _64, _128>, Shape<_1, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                      cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler, true>;

// Middle M (prefill chunks, 64 < M <= 1024): a 128x128 tile, stream-K where the tile count leaves SMs idle.
using MiddleM = Kernel<Shape<_128, _128, _128>, Shape<_1, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                       cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler, false>;

// Large M (compute bound): a 128x256 tile per two consumer warpgroups (each 64x256, the widest wgmma), a
// 2x1 cluster that multicasts each B tile to the two CTAs sharing it, persistent CTAs, one per SM.
using LargeM = Kernel<Shape<_128, _256, _128>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                      cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler, false>;

}  // namespace int8_gemm
