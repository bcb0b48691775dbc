// The small-M kernel's division of work, shared by the host (grid, workspace) and the device (each CTA's
// units, the contributors of a slab, the workspace slots). Plain C++ so that a host program can check it.
//
// The weight is cut into slabs of kSlab output channels (one weight-scale block) and K blocks of kBlock;
// a unit is one (slab, K block). The U = slabs x KB units, slab-major, are cut into G contiguous ranges of
// floor(U / G) or ceil(U / G) units, one per CTA. A CTA's range is a run of segments, one per slab it
// touches: whole slabs inside it, possibly a partial slab at either end. A slab touched by c > 1 CTAs is
// "shared": each of them writes an fp32 partial and raises its slot's flag; at the end each of the c waits
// for the c flags and reduces its 1/c of the slab.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SMALLM_HD __host__ __device__ __forceinline__
#else
#define SMALLM_HD inline
#endif

namespace fp8_block_gemm {
namespace smallm {

constexpr int kSlab = 128;   // output channels of a slab: the weight-scale block, two 64-row wgmma tiles
constexpr int kKBlock = 128; // K of a unit: one scale block

struct Plan {
  int slabs;  // ceil(N / 128)
  int kb;     // K / 128
  int units;  // slabs * kb
  int grid;   // G CTAs, 1 <= G <= units
};

// At least kMinUnits units per CTA: a tiny problem (the smoke shapes: 24 and 128 units) is latency
// bound, and a CTA streams 4 units in one DRAM round trip as fast as 1, with a quarter of the partials.
constexpr int kMinUnits = 4;

SMALLM_HD Plan make_plan(int n, int k, int ctas) {
  Plan p;
  p.slabs = (n + kSlab - 1) / kSlab;
  p.kb = k / kKBlock;
  p.units = p.slabs * p.kb;
  const int wanted = (p.units + kMinUnits - 1) / kMinUnits;
  p.grid = ctas < wanted ? ctas : wanted;
  if (p.grid < 1) p.grid = 1;
  return p;
}

// First unit of CTA i (i = grid gives units).
SMALLM_HD int range_begin(const Plan& p, int i) {
  return static_cast<int>(static_cast<int64_t>(i) * p.units / p.grid);
}

// The CTA whose range holds unit u: the largest i with range_begin(i) <= u.
SMALLM_HD int cta_of_unit(const Plan& p, int u) {
  return static_cast<int>((static_cast<int64_t>(u + 1) * p.grid - 1) / p.units);
}

// The CTAs that touch slab s: first .. first + count - 1.
struct Contributors {
  int first, count;
};
SMALLM_HD Contributors contributors(const Plan& p, int s) {
  const int first = cta_of_unit(p, s * p.kb);
  const int last = cta_of_unit(p, (s + 1) * p.kb - 1);
  return {first, last - first + 1};
}

// The workspace slot of CTA i's partial of slab s: two per CTA, its first slab's (head) and its last's
// (tail). Only a CTA's first and last segments can be partial slabs, and when they are the same slab the
// head slot is used.
SMALLM_HD int partial_slot(const Plan& p, int i, int s) {
  const int head = range_begin(p, i) / p.kb;
  return s == head ? 2 * i : 2 * i + 1;
}

// The share of a shared slab's outputs that contributor j of c reduces: [begin, end) in float4s of the
// slab's M x 128 tile (M * 32 float4s), row-major by token.
SMALLM_HD int share_begin(int j, int c, int m) {
  return static_cast<int>(static_cast<int64_t>(j) * (m * (kSlab / 4)) / c);
}

// Bytes of the workspace: one 32-bit flag per partial slot (2 G, rounded up to 256 bytes), then the 2 G
// partial slots of M x 128 fp32.
SMALLM_HD int64_t flags_bytes(const Plan& p) { return (static_cast<int64_t>(p.grid) * 2 * 4 + 255) / 256 * 256; }
SMALLM_HD int64_t slot_floats(int m) { return static_cast<int64_t>(m) * kSlab; }
SMALLM_HD int64_t workspace_bytes(const Plan& p, int m) {
  return flags_bytes(p) + 2 * static_cast<int64_t>(p.grid) * slot_floats(m) * 4;
}

// A slot's flag holds the epoch of the call that last wrote its partial. The host gives every call a new
// epoch in [1, 0xFFFFFFFE]: the harness's poison (0xFFFFFFFF), zeros and every earlier call's flags differ
// from it, so nothing has to be cleared before a call or reset after it.
constexpr uint32_t kMaxEpoch = 0xFFFFFFFEu;
SMALLM_HD uint32_t epoch_after(uint32_t epoch) { return epoch >= kMaxEpoch ? 1u : epoch + 1u; }

// The m64nNk32 wgmma accumulator, per thread of the warpgroup (0..127): value i is at row (channel within
// the warpgroup's 64) 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2) and column (token) 8 (i / 4) + 2 (t % 4)
// + i % 2.
SMALLM_HD int fragment_row(int t, int i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2); }
SMALLM_HD int fragment_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

// The staging tile of a segment's sum in shared memory: [token][channel], a row of 128 channels padded to
// 132 floats (a row is 528 bytes: 16-byte aligned, and the fragment's stores hit 32 distinct banks).
constexpr int kStagingStride = kSlab + 4;

}  // namespace smallm
}  // namespace fp8_block_gemm
