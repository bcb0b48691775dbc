// The small-M kernel's division of work, shared by the host (grid, cluster) and the device (each CTA's
// units, its share of the reduction). Plain C++ so that a host program can check it.
//
// The weight is cut into slabs of kSlab output channels (one weight-scale block) and K blocks of kKBlock;
// a unit is one (slab, K block). The slabs are dealt to Q clusters of C CTAs, a contiguous run of slabs to
// each cluster; within a cluster, CTA r streams the K blocks [r KB / C, (r + 1) KB / C) of every slab of
// its cluster. A slab's C partial sums therefore sit in the shared memory of one cluster, and are reduced
// there through distributed shared memory: no partial leaves the SMs and no CTA waits on another cluster.
// C trades the K loop's length (KB / C units per CTA and slab) against the reduction; Q is bounded by the
// clusters of C CTAs the GPU holds at once (its GPCs decide that, so the host asks the occupancy API).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SMALLM_HD __host__ __device__ __forceinline__
#else
#define SMALLM_HD inline
#endif

namespace fp8_block_gemm {
namespace smallm {

constexpr int kSlab = 128;       // output channels of a slab: the weight-scale block, two 64-row wgmma tiles
constexpr int kKBlock = 128;     // K of a unit: one scale block
constexpr int kMaxCluster = 16;  // Hopper's non-portable maximum (8 is the portable one)

// What one slab's reduction costs a cluster of more than one CTA, in units of streaming (about 0.6 us
// each at M 64 on the H200): the wait for the cluster's slowest CTA, the exchange through distributed
// shared memory and the bf16 stores. It keeps C small when a larger one saves only a unit or two.
constexpr int kReduceCost = 2;

struct Plan {
  int slabs;     // ceil(N / 128)
  int kb;        // K / 128
  int cluster;   // C: CTAs of a cluster, 1 <= C <= min(KB, kMaxCluster); 0 when no plan fits
  int clusters;  // Q: clusters, 1 <= Q <= slabs
  int grid;      // Q C CTAs
};

// The plan of the fewest units per CTA (each slab's reduction counted as kReduceCost units), the smaller
// C on a tie. resident[c] (c = 1 .. kMaxCluster) is how many clusters of c CTAs the GPU runs at once, 0
// where it cannot launch them; rounds = ceil(slabs / Q) slabs a cluster streams one after another.
SMALLM_HD Plan make_plan(int n, int k, const int* resident) {
  Plan best{(n + kSlab - 1) / kSlab, k / kKBlock, 0, 0, 0};
  int best_cost = 0;
  for (int c = 1; c <= kMaxCluster && c <= best.kb; ++c) {
    const int q_max = resident[c] < best.slabs ? resident[c] : best.slabs;
    if (q_max < 1) continue;
    const int rounds = (best.slabs + q_max - 1) / q_max;
    const int cost = rounds * ((best.kb + c - 1) / c + (c > 1 ? kReduceCost : 0));
    if (best.cluster == 0 || cost < best_cost) {
      best_cost = cost;
      best.cluster = c;
      best.clusters = (best.slabs + rounds - 1) / rounds;  // the fewest clusters with that many rounds
    }
  }
  best.grid = best.cluster * best.clusters;
  return best;
}

// The first slab of cluster q (q = clusters gives slabs), and the first K block of rank r in its cluster
// (r = cluster gives kb).
SMALLM_HD int slab_begin(const Plan& p, int q) { return static_cast<int>(static_cast<int64_t>(q) * p.slabs / p.clusters); }
SMALLM_HD int k_begin(const Plan& p, int r) { return static_cast<int>(static_cast<int64_t>(r) * p.kb / p.cluster); }

// The share of a slab's outputs that rank j of c reduces: [begin, end) in float4s of the slab's M x 128
// tile (M * 32 float4s), row-major by token.
SMALLM_HD int share_begin(int j, int c, int m) {
  return static_cast<int>(static_cast<int64_t>(j) * (m * (kSlab / 4)) / c);
}

// The m64nNk32 wgmma accumulator, per thread of the warpgroup (0..127): value i is at row (channel within
// the warpgroup's 64) 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2) and column (token) 8 (i / 4) + 2 (t % 4)
// + i % 2.
SMALLM_HD int fragment_row(int t, int i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2); }
SMALLM_HD int fragment_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

// The staging tile of a slab's partial sum in shared memory: [token][channel], a row of 128 channels
// padded to 132 floats (a row is 528 bytes: 16-byte aligned, and the fragment's stores hit 32 distinct banks).
constexpr int kStagingStride = kSlab + 4;

}  // namespace smallm
}  // namespace fp8_block_gemm
