// The CUTLASS GEMM types of optim/muon_newton_schulz's expert, composed from CUTLASS 4.2's public sm90
// builders: TMA warp-specialized cooperative bf16 mainloops (wgmma with fp32 accumulators) and epilogues that
// compute alpha * acc + beta * C in fp32, rounded once to bf16. Each Newton-Schulz combination is such an
// epilogue: B = c (A A) + b A and X' = 1 (B X) + a X; the Gram matrix A = X X^T is alpha 1, beta 0 (the C
// operand is then never loaded).
//
// The two symmetric products (A = X X^T and A A) are triangle GEMMs: a tile scheduler of our own
// (TriangleScheduler) hands out only the tiles (i, j) with i <= j of each [m, m] output, and the epilogue
// stores every tile twice, once where it is (D, row-major) and once transposed (an auxiliary TMA store of the
// same values through a column-major view of the same buffer): the mirror image lands on tile (j, i). So the
// consumers (A A, B X) read full, exactly symmetric matrices and no mirror pass is needed.
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
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
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
  static constexpr bool kMirror = false;
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

// The full products (B X, Y B): 128 x 256 tiles over two consumer warpgroups (each 64 x 256, the widest
// wgmma), K steps of 64, a 2 x 1 cluster sharing each B-operand tile by TMA multicast, persistent CTAs, one
// per SM.
using Tile = Shape<_128, _256, _64>;
using Cluster = Shape<_2, _1, _1>;

using GemmTT = Gemm<cutlass::layout::RowMajor, cutlass::layout::RowMajor, Tile, Cluster>;
using GemmTN = Gemm<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor, Tile, Cluster>;

// ---- The symmetric products: one triangle of tiles, each stored twice ----

// The tile-scheduler tag of the triangle GEMMs (TileSchedulerSelector maps it to TriangleScheduler below).
struct TriangleTiles {};

// The number of work units of a triangle GEMM over (m, m, *, L) on square tiles of `tile` rows.
inline int64_t triangle_units(int64_t m, int64_t L, int64_t tile) {
  const int64_t T = (m + tile - 1) / tile;
  return T * (T + 1) / 2 * L;
}

// A persistent scheduler over the upper triangle of an [m, m] output's tiles, matrix by matrix of the batch:
// work unit u of matrix l is the u-th tile of the triangle in row-major order (row i holds tiles (i, i) ..
// (i, T - 1)), T (T + 1) / 2 units per matrix. CTA c takes units c, c + grid, c + 2 grid, ... (the static
// round robin of CUTLASS's PersistentTileSchedulerSm90, whose Params, workspace and fix-up hooks it reuses:
// they do not depend on which tile a unit is). One CTA per cluster: a 2 x 1 cluster would need both CTAs on
// one column of tiles, and half the columns of a triangle hold odd counts (notes.md: a balanced choice of
// which side of the diagonal each tile is computed on would fix that).
class TriangleScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using Params = Base::Params;
  using WorkTileInfo = Base::WorkTileInfo;

  CUTLASS_HOST_DEVICE TriangleScheduler() {}

  // Params is the base's, made for the full M x N rectangle of tiles (no swizzle: max_swizzle_size stays 1,
  // so problem_tiles_n_ is ceil(N / BLK_N) = T).
  CUTLASS_DEVICE explicit TriangleScheduler(Params const& params) {
    scheduler_params = params;
    tiles_ = params.problem_tiles_n_;
    per_matrix_ = tiles_ * (tiles_ + 1) / 2;
    total_ = per_matrix_ * params.problem_tiles_l_;  // under 2^31: the host checks (triangle_units)
#if defined(__CUDA_ARCH__)
    next_ = blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y;
    stride_ = gridDim.x * gridDim.y * gridDim.z;
#endif
  }

  // 32-bit arithmetic throughout: a 64-bit division is a call into a helper in the scheduler's loop.
  CUTLASS_DEVICE WorkTileInfo work_for(uint32_t unit) const {
    if (unit >= total_) return WorkTileInfo::invalid_work_tile();
    const uint32_t l = unit / per_matrix_;
    uint32_t r = unit - l * per_matrix_;
    uint32_t i = 0, row = tiles_;  // row i of the triangle holds T - i tiles
    while (r >= row) {
      r -= row;
      --row;
      ++i;
    }
    return {static_cast<int32_t>(i), static_cast<int32_t>(i + r), static_cast<int32_t>(l), true};
  }

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return work_for(next_);
  }

  CUTLASS_DEVICE WorkTileInfo get_current_work() const { return work_for(next_); }

  CUTLASS_DEVICE void advance_to_next_work(uint32_t count = 1) { next_ += stride_ * count; }

  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo&, uint32_t count = 1) const {
    return !work_for(next_ + stride_ * count).is_valid();
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }

  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo work, Pipeline&, PipelineState) {
    return fetch_next_work(work);
  }

 private:
  uint32_t next_ = 0, stride_ = 1, per_matrix_ = 0, total_ = 0, tiles_ = 0;
};

}  // namespace muon

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<muon::TriangleTiles, ArchTag, TileShape, ClusterShape, SchedulerPipelineStageCount> {
  static_assert(cute::size(ClusterShape{}) == 1, "the triangle scheduler hands out single tiles: a 1 x 1 cluster");
  static_assert(cute::size<0>(TileShape{}) == cute::size<1>(TileShape{}), "triangle tiles must be square");
  using Scheduler = muon::TriangleScheduler;
};
}  // namespace cutlass::gemm::kernel::detail

namespace muon {

// A symmetric product D = alpha (A B) + beta C over (m, m, K, L) whose result is known symmetric: only tiles
// (i, j) with i <= j are computed, on 128 x 128 tiles (the triangle's tile count divides better than with
// 128 x 256: 528 tiles for m = 4096 are exactly 4 rounds of 132 SMs, where 128 x 256 gives 272, just over 2
// rounds, so 3). The epilogue is the LinearCombination tree (rounded once to bf16, C skipped when beta is
// 0) under an auxiliary TMA store of the same bf16 values through the column-major view (stride 1, ldd,
// batch) of D's own buffer: element (r, c) of the tile is written at D[r][c] and at D[c][r]. On a diagonal
// tile both stores cover the same block with the same values (the product's (r, c) and (c, r) are the same
// fp32 sums of the same products in the same order).
//
// (The tile shapes are template parameters only so that the builders' types stay dependent: GCC, as nvcc's
// host compiler, rejects the epilogue builder when it is resolved at the template's definition.)
template <class LayoutA, class LayoutB, class Tile = Shape<_128, _128, _64>, class Cluster = Shape<_1, _1, _1>,
          class EpilogueTile = Shape<_128, _32>>  // the epilogue tile EpilogueTileAuto picks for 128-row tiles
struct TriangleGemm {
  static constexpr bool kMirror = true;
  static constexpr int kTileRows = cute::size<0>(Tile{});
  static constexpr int kStoreStages = 2;  // the builder's StagesD: min(4 epilogue tiles per CTA tile, 2)
  using MirrorStride = cute::Stride<cute::_1, int64_t, int64_t>;
  using MirrorAtom = decltype(cutlass::epilogue::collective::detail::sm90_get_epilogue_smem_swizzle_layout_atom<
                              MirrorStride, Bf16, EpilogueTile>());
  using MirrorCopy = decltype(cutlass::epilogue::collective::detail::sm90_get_smem_store_op_for_accumulator<
                              MirrorStride, Bf16, EpilogueTile>());
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  using Fusion = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90AuxStore<kStoreStages, EpilogueTile, Bf16, kRound, MirrorStride, MirrorAtom,
                                              MirrorCopy, kAlignment>,
      cutlass::epilogue::fusion::Sm90LinearCombination<Bf16, float, Bf16, float, kRound>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, EpilogueTile, float, float, Bf16,
      cutlass::layout::RowMajor, kAlignment, Bf16, cutlass::layout::RowMajor, kAlignment,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA, kAlignment, Bf16, LayoutB, kAlignment, float,
      Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
                                                      TriangleTiles>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using TriangleTN = TriangleGemm<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;  // X X^T, A A
using TriangleNT = TriangleGemm<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;  // Y^T Y

}  // namespace muon
