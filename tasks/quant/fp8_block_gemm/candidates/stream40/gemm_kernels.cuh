// The two CUTLASS kernel types of quant/fp8_block_gemm's expert, composed from CUTLASS 4.2's public sm90
// builders: the TMA warp-specialized fp8 mainloop with blockwise scaling (wgmma e4m3 x e4m3 into an fp32
// fragment that is zeroed every 128-wide K block and promoted into a second fp32 fragment as
// acc += partial * scale_a * scale_b, which is DeepSeek-V3's per-block semantics), and a plain epilogue that
// rounds the promoted fp32 sum once to bf16.
//
// Both operands are K-major (a [M, K] and b [N, K] row-major), the layout fp8 wgmma reads from shared
// memory. The scale layouts are the task's: sa MN-major (token stride 1, column stride align(M, 4): TMA can
// load a tile's 128 or 64 token scales per K block as one 16-byte-aligned box), sb row-major [NB, KB]
// (one scale per tile and K block, loaded with cp.async). `Swapped` kernels compute C^T = B A^T so that a
// small M becomes the wgmma N extent instead of padding a 64-row warpgroup tile with absent tokens.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>
#include <cutlass/detail/blockwise_scale_layout.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/float8.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

namespace fp8_block_gemm {

using cute::Shape;
using cute::_1;
using Bf16 = cutlass::bfloat16_t;
using E4m3 = cutlass::float_e4m3_t;
constexpr int kBlock = 128;

// A GEMM over K-major e4m3 operands with block scales. Unswapped: (M, N, K), the tokens as the first
// operand with one scale per row and K block (granularity 1 x 128), the weight with one per 128 x 128
// block; C row-major. Swapped: (N, M, K), the weight first (granularity 128 x 128), the tokens second
// (granularity 1 x 128, along N of the swapped problem); C^T column-major, the same memory as C row-major.
template <class Tile, class Cluster, class MainloopSchedule, class EpilogueSchedule, class Scheduler, bool Swapped>
struct Kernel {
  static constexpr bool swapped = Swapped;
  // The weight's scales are row-major [NB, KB]: K-major. The tokens' are MN-major.
  static constexpr auto kTokenMajor = cute::GMMA::Major::MN;
  static constexpr auto kWeightMajor = cute::GMMA::Major::K;
  using ScaleConfig =
      std::conditional_t<Swapped, cutlass::detail::Sm90BlockwiseScaleConfig<kBlock, 1, kBlock, kWeightMajor, kTokenMajor>,
                         cutlass::detail::Sm90BlockwiseScaleConfig<1, kBlock, kBlock, kTokenMajor, kWeightMajor>>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
  using LayoutC = std::conditional_t<Swapped, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;

  // D = 1 * acc in fp32, rounded once to bf16 (round to nearest even); no C operand.
  using Fusion = cutlass::epilogue::fusion::LinearCombination<Bf16, float, void, float,
                                                              cutlass::FloatRoundStyle::round_to_nearest>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, void, LayoutC, 8, Bf16, LayoutC, 8, EpilogueSchedule, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E4m3, cute::tuple<cutlass::layout::RowMajor, LayoutSFA>, 16,
      E4m3, cute::tuple<cutlass::layout::ColumnMajor, LayoutSFB>, 16, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
                                                          Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

using namespace cute;  // the _N integer constants of the tile shapes below

// Small M (decode, M <= 64): bound by reading the weight once. Swapped, so the 128-row wgmma runs over
// output channels and the tokens fill a 64-wide N; stream-K spreads the K loop of the few output tiles
// (N 2112 gives 17) over every SM. Each K iteration is exactly one scale block, so a stream-K unit's
// partial sum is already scaled and the fp32 partials add as the task's sum over blocks does.
using SmallM = Kernel<Shape<_128, _64, _128>, Shape<_1, _1, _1>,
                      cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8BlockScaledAccum,
                      cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler, true>;

// Large M (prefill, compute bound): 128 x 128 tiles split between two consumer warpgroups (64 x 128 each:
// the wgmma fragment and the promoted sum together take 128 of a consumer's registers; a 128 x 256 tile
// would need 256 and spill), a 1 x 2 cluster whose two CTAs share the A (token) tile by TMA multicast,
// persistent CTAs, one per SM.
using LargeM = Kernel<Shape<_128, _128, _128>, Shape<_1, _2, _1>,
                      cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8BlockScaledAccum,
                      cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler, false>;

}  // namespace fp8_block_gemm
