// The three CUTLASS GEMM types of optim/muon_newton_schulz's expert, composed from CUTLASS 4.2's public sm90
// builders: a TMA warp-specialized cooperative bf16 mainloop (wgmma with fp32 accumulators) and the
// LinearCombination epilogue D = alpha * acc + beta * C in fp32, rounded once to bf16. Each Newton-Schulz
// combination is such an epilogue: B = c (A A) + b A and X' = 1 (B X) + a X; the Gram matrix A = X X^T is
// alpha 1, beta 0 (the C operand is then never loaded).
//
// X stays in the input's own layout all through: [m, n] row-major when rows <= cols, and its transpose Y
// [n, m] row-major when rows > cols. The operand majors differ between the two, and bf16 wgmma reads either
// major from shared memory, so no transpose is ever materialized:
//   rows <= cols: A = X X^T (both K-major: TN), B = c A A + b A (TN), X' = B X + a X (X N-major: TT)
//   rows >  cols: A = Y^T Y (both MN-major: NT), B as above (TN), Y' = Y B + a Y (B symmetric: TN)
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

namespace muon {

using cute::Shape;
using Bf16 = cutlass::bfloat16_t;
constexpr int kAlignment = 8;  // elements: the 16 bytes TMA needs of every leading dimension

// A batched bf16 GEMM (M, N, K, L) with fp32 accumulation and a fused alpha/beta epilogue. LayoutA is the
// first operand's [M, K] layout (RowMajor: K-major), LayoutB the second's as CUTLASS names it for [K, N]
// (ColumnMajor: K-major, RowMajor: N-major); C and D row-major.
template <class LayoutA, class LayoutB, class Tile, class Cluster>
struct Gemm {
  using Fusion = cutlass::epilogue::fusion::LinearCombination<Bf16, float, Bf16, float,
                                                              cutlass::FloatRoundStyle::round_to_nearest>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, Bf16, cutlass::layout::RowMajor, kAlignment, Bf16, cutlass::layout::RowMajor, kAlignment,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA, kAlignment, Bf16, LayoutB, kAlignment, float,
      Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using namespace cute;  // the _N integer constants of the tile shapes below

// 128 x 256 tiles over two consumer warpgroups (each 64 x 256, the widest wgmma), K steps of 64, a 2 x 1
// cluster sharing each B-operand tile by TMA multicast, persistent CTAs, one per SM.
using Tile = Shape<_128, _256, _64>;
using Cluster = Shape<_2, _1, _1>;

using GemmTN = Gemm<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor, Tile, Cluster>;
using GemmNT = Gemm<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, Tile, Cluster>;
using GemmTT = Gemm<cutlass::layout::RowMajor, cutlass::layout::RowMajor, Tile, Cluster>;

}  // namespace muon
