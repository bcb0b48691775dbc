// sample/top_k_top_p: expert CUDA solution for the H200 (sm_90a), v1.1.
//
// One CTA of 512 threads per row, no sort. The k-th largest probability and the top-p boundary are
// found by a radix select on the float bits (positive floats order as their bit patterns): a histogram
// of the top 11 bits with each bin's count and mass, then, inside the bin that holds the answer, of the
// next 11 bits, then of the last 9, so that the thresholds are exact values and tie groups stay whole.
// After the first histogram the tokens that can survive (every bin from the k-th's bin, or from the
// top-p bin when there is no top-k, upwards) are usually a few hundred: they are copied, in index
// order, into shared memory and everything else runs there.
//
// v1.1 keeps v1's selection and its results (the same thresholds, kept masses, Philox number and
// index-order inverse CDF: the same token for the same seed and inputs) and removes what v1's time went
// into (notes.md, "v1.1"): every pass over a row ran on one SM with one 16 KB tile of loads in flight and
// waited for the memory at every tile, three shared atomics per value in the first histogram, a second
// pass over the row with a block scan per tile, and about 190 barriers per row.
// - Passes over the row stream it through a ring of kStages shared-memory slots per thread filled by
//   cp.async three tiles ahead (48 KB in flight per SM instead of 16 KB, no registers held); at small B
//   the whole row is prefetched into L2 at the start.
// - The first histogram counts only (one atomic per value) when the row has a top-k (the k-th value's bin
//   needs counts; the kept mass is summed over the survivors later), and adds a mass with one returning
//   32-bit atomic plus a rare carry instead of two. It records each 8-value sector's largest bin (a byte).
// - The survivors are gathered by sector: the sectors whose largest bin reaches the chosen bin, whole,
//   by one block scan and one batch of cp.async (no second pass over the row, no scan per tile).
// - A bin is chosen with one block scan of (count, mass) pairs; its single owner writes the choice. Without
//   top-k the first histogram is the top-p search's first level, which is not done again.
// - Kept sets too large for the list (no filter, or a top-p boundary deep in the tail) draw through
//   per-chunk masses (one streamed pass, one block scan, one warp scan) instead of a block scan per tile.
// Masses are fixed point (probability x 2^40, truncated): integer sums are exact in any order, so atomics
// and scans give the same bits on every run (the task is deterministic). The draw is an inverse CDF in
// index order over the kept tokens with one uniform number from Philox-4x32-10 keyed on (seed, row).
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kPer = 8;                  // consecutive elements per thread per step of a pass: one 32-byte sector
constexpr int kTile = kPer * kThreads;   // elements per step
constexpr int kStages = 4;               // slots per thread in the streaming ring: kStages - 1 steps in flight
constexpr int kSlots = 8192;             // values the shared-memory list holds
constexpr int kChunk = 32 * kPer;        // elements per chunk of the chunked draw: one warp's part of a step
constexpr int kFastVocab = 393216;       // the longest row that keeps sector codes and chunk masses on chip
constexpr int kMaxChunks = kFastVocab / kChunk;
constexpr int kMaxBins = 2048;
constexpr int kBinsPer = kMaxBins / kThreads;  // bins per thread when choosing one
constexpr int kCodeBase = 761;           // sector codes: bins 761..1016 (values 2^-32..1) exactly, saturated outside
constexpr int kTinyBin = 696;            // the first-level bin of 2^-40: values below it have a fixed-point mass of 0
constexpr long long kPrefetchBytes = 16ll << 20;  // rows prefetched into L2 whole while B x V x 4 stays below this
// The three digits of a positive float's bits (bit 31 is 0): 30..20, 19..9, 8..0.
__host__ __device__ constexpr int shift_of(int level) { return level == 0 ? 20 : level == 1 ? 9 : 0; }
__host__ __device__ constexpr int bins_of(int level) { return level == 2 ? 512 : 2048; }
constexpr float kFixed = 1099511627776.0f;  // 2^40

using u64 = unsigned long long;

struct Pair {
  u64 count, mass;
};
struct PairSum {
  __device__ Pair operator()(const Pair& a, const Pair& b) const { return {a.count + b.count, a.mass + b.mass}; }
};
using Scan = cub::BlockScan<u64, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
using PairScan = cub::BlockScan<Pair, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

__device__ __forceinline__ u64 fixed(float x) { return __float2ull_rz(x * kFixed); }

// Philox-4x32-10 (Salmon et al., SC'11): counter (row, 0, 0, 0), key the seed; 53 bits of the output.
__device__ double philox_uniform(u64 seed, unsigned row) {
  unsigned c0 = row, c1 = 0, c2 = 0, c3 = 0;
  unsigned k0 = static_cast<unsigned>(seed), k1 = static_cast<unsigned>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  const u64 bits = (static_cast<u64>(c0) << 21) ^ (static_cast<u64>(c1) >> 11) ^ (static_cast<u64>(c2) << 32);
  return static_cast<double>(bits & ((u64{1} << 53) - 1)) * 0x1.0p-53;
}

// The target of the inverse CDF: u of the kept mass, in the same fixed point.
__device__ __forceinline__ u64 target_of(double u, u64 kept) {
  const u64 target = static_cast<u64>(u * static_cast<double>(kept));
  return target < kept ? target : kept - 1;
}

// Lives in dynamic shared memory, followed by the streaming ring and the sector codes.
struct Shared {
  unsigned count[kMaxBins + 1];  // + the first pass's bin for values that are not positive (never read)
  unsigned mass_lo[kMaxBins + 1], mass_hi[kMaxBins + 1];  // a bin's mass = hi * 2^32 + lo
  alignas(16) float value[kSlots];
  int index[kSlots];
  u64 chunk[kMaxChunks];  // the kept mass of each chunk of kChunk elements of the row (chunked draw)
  union {
    typename Scan::TempStorage scan;
    typename PairScan::TempStorage pair_scan;
  };
  u64 sums[kWarps * 3];
  int chosen;
  int found;
  int listed;
  u64 excl_count, excl_mass, bin_count, bin_mass, found_before;
};
constexpr size_t kRingOffset = (sizeof(Shared) + 15) / 16 * 16;
constexpr size_t kRingBytes = sizeof(float4) * 2 * kThreads * kStages;

// What a pass reads, kPer consecutive elements per thread per tile: the row in global memory (16-byte loads
// when aligned), or a list in shared memory (`index` set; in index order wherever a draw runs over it).
struct Source {
  const float* x;
  const int* index;  // nullptr for the row itself
  int n;
  bool vector;
  __device__ void load(int base, float (&v)[kPer]) const {
    if (vector && base + kPer - 1 < n) {
      for (int h = 0; h < kPer / 4; ++h) {
        const float4* at = reinterpret_cast<const float4*>(x + base) + h;
        const float4 q = index ? *at : __ldg(at);
        v[4 * h] = q.x, v[4 * h + 1] = q.y, v[4 * h + 2] = q.z, v[4 * h + 3] = q.w;
      }
      return;
    }
    for (int j = 0; j < kPer; ++j) v[j] = base + j < n ? x[base + j] : 0.0f;
  }
  __device__ int token(int i) const { return index ? index[i] : i; }
};

// Whether x > 0 matches the digits chosen above `level` (prefix) and is at least `floor`.
__device__ __forceinline__ bool in_prefix(float x, int level, unsigned prefix, float floor) {
  if (!(x > 0.0f) || x < floor) return false;
  const int above = level == 0 ? 31 : shift_of(level - 1);
  return (__float_as_uint(x) >> above) == prefix;
}

__device__ __forceinline__ u64 bin_mass(const Shared& s, int b) {
  return (static_cast<u64>(s.mass_hi[b]) << 32) + s.mass_lo[b];
}

// Adds a mass to bin d with one 32-bit atomic: the low word takes the mass's low 32 bits, and the adder that
// wraps it carries one into the high word (with the mass's own high bits, set only for values of 2^-8 or more).
__device__ __forceinline__ void add_mass(Shared& s, int d, u64 m) {
  const unsigned lo = static_cast<unsigned>(m), old = atomicAdd(&s.mass_lo[d], lo);
  const unsigned hi = static_cast<unsigned>(m >> 32) + (old + lo < old ? 1u : 0u);
  if (hi != 0) atomicAdd(&s.mass_hi[d], hi);
}

__device__ __forceinline__ int digit(float x, int level) {
  return static_cast<int>((__float_as_uint(x) >> shift_of(level)) & static_cast<unsigned>(bins_of(level) - 1));
}

// A sector's code: its largest first-level bin, exact over 761..1016 and saturated outside (monotone, so a
// sector whose largest bin reaches b has a code at least code_of(b)).
__device__ __forceinline__ int code_of(int bin) { return min(max(bin - kCodeBase, 0), 255); }

// Sums N values over the block; every thread gets the sums.
template <int N>
__device__ void block_sum(Shared& s, u64 (&v)[N]) {
  for (int i = 0; i < N; ++i)
    for (int offset = 16; offset > 0; offset /= 2) v[i] += __shfl_xor_sync(~0u, v[i], offset);
  if (threadIdx.x % 32 == 0)
    for (int i = 0; i < N; ++i) s.sums[threadIdx.x / 32 * N + i] = v[i];
  __syncthreads();
  for (int i = 0; i < N; ++i) {
    v[i] = 0;
    for (int w = 0; w < kWarps; ++w) v[i] += s.sums[w * N + i];
  }
  __syncthreads();
}

// --- Asynchronous copies (cp.async: global to shared, no registers; zeros past the copied bytes) ---

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy16(void* to, const float* from, int bytes) {  // bytes in [0, 16], the rest zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(to)), "l"(from), "r"(bytes) : "memory");
}

__device__ __forceinline__ void copy4(void* to, const float* from, int bytes) {  // bytes 0 or 4
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(shared_address(to)), "l"(from), "r"(bytes) : "memory");
}

// Copies the kPer elements of the row from `first` on into lo (the first four) and hi (the last four), with
// zeros past the row's end; 16-byte copies when the row's start is 16-byte aligned.
__device__ __forceinline__ void copy_sector(const Source& row, int first, float4* lo, float4* hi) {
  if (row.vector && first + kPer <= row.n) {
    copy16(lo, row.x + first, 16), copy16(hi, row.x + first + 4, 16);
  } else if (row.vector) {
    for (int h = 0; h < 2; ++h) {
      const int have = row.n - (first + 4 * h), bytes = have >= 4 ? 16 : have > 0 ? 4 * have : 0;
      copy16(h ? hi : lo, bytes > 0 ? row.x + first + 4 * h : row.x, bytes);
    }
  } else {
    for (int j = 0; j < kPer; ++j) {
      const bool in = first + j < row.n;
      copy4(reinterpret_cast<float*>(j < 4 ? lo : hi) + j % 4, in ? row.x + first + j : row.x, in ? 4 : 0);
    }
  }
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Starts the whole row on its way into L2 (small B only: B x V x 4 bytes well inside the L2), so that the
// streamed pass waits for L2 rather than DRAM. 16-byte pieces inside the row only.
__device__ void prefetch_row(const float* x, int n) {
  constexpr u64 kPiece = 32768;
  const u64 begin = (reinterpret_cast<u64>(x) + 15) & ~u64{15}, end = reinterpret_cast<u64>(x + n) & ~u64{15};
  for (u64 at = begin + threadIdx.x * kPiece; at < end; at += kThreads * kPiece)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(at), "r"(static_cast<unsigned>(min(end - at, kPiece)))
                 : "memory");
}

// A pass over the row: body(first, v) for the kPer elements thread t reads at each step (from first =
// step * kTile + kPer * t on, zeros past the end). The elements come through a ring of kStages slots per
// thread in shared memory (slot [stage][half][thread]: conflict-free 16-byte reads), filled by cp.async
// kStages - 1 steps ahead: 48 KB in flight per CTA while the body works. Each thread reads only what it
// copied itself (cp.async.wait_group makes its own copies visible to it): no barrier. Every thread runs
// every step, so the body may use warp collectives.
template <class Body>
__device__ __forceinline__ void stream(const Source& source, float4* ring, Body&& body) {
  const Source row = source;  // in registers (the copies' memory clobbers would reload a referenced one)
  const int steps = (row.n + kTile - 1) / kTile;
  const int whole = row.vector ? row.n / kTile : 0;  // steps of plain 16-byte copies (a block-uniform test)
  float4* const mine = ring + threadIdx.x;
  const float* const from = row.x + kPer * threadIdx.x;
  const auto fill = [&](int step) {
    float4* slot = mine + (step % kStages) * 2 * kThreads;
    if (step < whole)
      copy16(slot, from + step * kTile, 16), copy16(slot + kThreads, from + step * kTile + 4, 16);
    else if (step < steps)
      copy_sector(row, step * kTile + kPer * threadIdx.x, slot, slot + kThreads);
    commit_copies();  // an empty group past the end keeps the count of pending groups uniform
  };
  for (int step = 0; step < kStages - 1; ++step) fill(step);
  for (int step = 0; step < steps; ++step) {
    wait_copies<kStages - 2>();  // this step's group is complete; the kStages - 2 after it may not be
    const float4* slot = mine + (step % kStages) * 2 * kThreads;
    const float4 a = slot[0], b = slot[kThreads];
    const float v[kPer] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    fill(step + kStages - 1);  // into the slot the previous step read (and its body consumed)
    body(step * kTile + kPer * static_cast<int>(threadIdx.x), v);
  }
  wait_copies<0>();
}

// body(v) for every kPer elements of `source`: the list in shared memory read in place, or the row streamed.
template <class Body>
__device__ __forceinline__ void each_sector(const Source& source, float4* ring, Body&& body) {
  if (source.index) {
    for (int base = 0; base < source.n; base += kTile) {
      float v[kPer];
      source.load(base + kPer * threadIdx.x, v);
      body(v);
    }
  } else {
    stream(source, ring, [&](int, const float (&v)[kPer]) { body(v); });
  }
}

// --- The first histogram: the top 11 bits of the whole row ---

// Counts every positive value into its first-level bin, with kMass its mass too, and records each sector's
// code (codes may be null: rows too long for them; else they hold a byte per thread and step, past the row's
// end too).
template <bool kMass>
__device__ __noinline__ void first_histogram(Shared& s, const Source& source, float4* ring, unsigned char* codes) {
  const Source row = source;  // in registers
  for (int b = threadIdx.x; b < kMaxBins; b += kThreads) s.count[b] = 0, s.mass_lo[b] = 0, s.mass_hi[b] = 0;
  __syncthreads();
  stream(row, ring, [&](int first, const float (&v)[kPer]) {
    int top = 0;  // the largest bit pattern of the sector: its largest value's when it holds a positive one
    for (int j = 0; j < kPer; ++j) {  // every lane counts (the others into bin kMaxBins): no branch per value
      const bool positive = v[j] > 0.0f;
      const int d = positive ? static_cast<int>(__float_as_uint(v[j]) >> 20) : kMaxBins;
      atomicAdd(&s.count[d], 1u);
      if (kMass && positive) add_mass(s, d, fixed(v[j]));  // (zeros would serialize returning adds on one word)
      top = max(top, __float_as_int(v[j]));
    }
    if (codes) codes[static_cast<unsigned>(first) / kPer] = static_cast<unsigned char>(code_of(top >> 20));
  });
  __syncthreads();
}

struct Totals {
  u64 positive, mass, big;  // positive values, their mass, values of a nonzero fixed-point mass
};

__device__ Totals totals(Shared& s) {
  u64 v[3] = {0, 0, 0};
  for (int j = 0; j < kBinsPer; ++j) {
    const int b = kBinsPer * threadIdx.x + j;
    v[0] += s.count[b], v[1] += bin_mass(s, b), v[2] += b >= kTinyBin ? s.count[b] : 0;
  }
  block_sum(s, v);
  return {v[0], v[1], v[2]};
}

// --- Histograms of the refinement levels and the choice of a bin ---

// The histogram of digit `level` over the values x > 0 of `src` in bin `prefix` of the level above and at least
// `floor` (counts, with `masses` the masses too): over the list in shared memory, or the row streamed.
__device__ __noinline__ void histogram(Shared& s, const Source& source, float4* ring, int level, unsigned prefix,
                                       float floor, bool masses) {
  const Source src = source;  // in registers
  for (int b = threadIdx.x; b < bins_of(level); b += kThreads) s.count[b] = 0, s.mass_lo[b] = 0, s.mass_hi[b] = 0;
  __syncthreads();
  const auto add = [&](const float (&v)[kPer]) {
    for (int j = 0; j < kPer; ++j) {
      if (!in_prefix(v[j], level, prefix, floor)) continue;
      const int d = digit(v[j], level);
      atomicAdd(&s.count[d], 1u);
      if (masses) add_mass(s, d, fixed(v[j]));
    }
  };
  each_sector(src, ring, add);
  __syncthreads();
}

// Over the bins in descending order (thread t holds places kBinsPer t to kBinsPer t + kBinsPer - 1): by
// count, the first bin whose inclusive count reaches `rank`; by mass, the last non-empty bin whose
// exclusive mass is below `limit`. One scan of (count, mass) pairs; the one place that qualifies knows it
// (by mass: a non-empty place is the last one below the limit when its inclusive mass reaches the limit or
// no non-empty place follows) and leaves the chosen bin, its exclusive count and mass, and its own, in
// shared memory.
__device__ __noinline__ void choose(Shared& s, int level, bool by_count, u64 rank, u64 limit) {
  const int bins = bins_of(level);
  Pair own[kBinsPer], sum{0, 0};
  for (int j = 0; j < kBinsPer; ++j) {
    const int place = kBinsPer * threadIdx.x + j, bin = bins - 1 - place;
    own[j] = place < bins ? Pair{s.count[bin], bin_mass(s, bin)} : Pair{0, 0};
    sum = PairSum{}(sum, own[j]);
  }
  Pair before, all;
  PairScan(s.pair_scan).ExclusiveScan(sum, before, Pair{0, 0}, PairSum{}, all);
  for (int j = 0; j < kBinsPer; ++j) {
    const u64 c = own[j].count, m = own[j].mass;
    const bool chosen = c > 0 && (by_count ? before.count < rank && rank <= before.count + c
                                           : before.mass < limit && (before.mass + m >= limit || before.count + c == all.count));
    if (chosen) {
      s.chosen = bins - 1 - (kBinsPer * static_cast<int>(threadIdx.x) + j);
      s.excl_count = before.count, s.excl_mass = before.mass, s.bin_count = c, s.bin_mass = m;
    }
    before = PairSum{}(before, own[j]);
  }
  __syncthreads();
}

// The exact value selected by refining from `level` on inside bin `prefix` of the level above, by the
// k-th largest (rank) or by the top-p mass limit; `above` gathers the mass of the values above it (with
// `masses`). Leaves the mass of the value's own group in s.bin_mass (with `masses`).
__device__ __noinline__ float refine(Shared& s, const Source& src, float4* ring, int level, unsigned prefix, float floor,
                                     bool by_count, u64 rank, u64 limit, u64& above, bool masses) {
  for (; level < 3; ++level) {
    histogram(s, src, ring, level, prefix, floor, masses);
    choose(s, level, by_count, rank, limit - above);
    rank -= s.excl_count;
    above += s.excl_mass;
    prefix = (prefix << (level == 2 ? 9 : 11)) | static_cast<unsigned>(s.chosen);
  }
  return __uint_as_float(prefix);
}

// The inverse CDF in index order over the values at least `threshold`: the first whose inclusive
// cumulative mass exceeds `target` (< the total of those masses). A block scan per tile (v1's): the list,
// and rows too long for chunk masses.
__device__ __noinline__ int draw(Shared& s, const Source& src, float threshold, u64 target) {
  if (threadIdx.x == 0) s.found = -1;
  __syncthreads();
  u64 carry = 0;
  for (int base = 0; base < src.n; base += kTile) {
    float v[kPer];
    const int first = base + kPer * threadIdx.x;
    src.load(first, v);
    u64 m[kPer], own = 0;
    for (int j = 0; j < kPer; ++j) own += (m[j] = v[j] > 0.0f && v[j] >= threshold ? fixed(v[j]) : 0);
    u64 before, total;
    Scan(s.scan).ExclusiveSum(own, before, total);
    before += carry;
    if (before <= target && target < before + own) {
      for (int j = 0; j < kPer; ++j) {
        if (target < before + m[j]) {
          s.found = src.token(first + j);
          break;
        }
        before += m[j];
      }
    }
    __syncthreads();
    if (s.found >= 0) return s.found;
    carry += total;
  }
  return s.found;
}

// The mass of the values at least `threshold` (every positive one when it is 0): the list, or the row streamed.
__device__ __noinline__ u64 mass_at_least(Shared& s, const Source& source, float4* ring, float threshold) {
  const Source src = source;  // in registers
  u64 v[1] = {0};
  const auto add = [&](const float (&x)[kPer]) {
    for (int j = 0; j < kPer; ++j) v[0] += x[j] > 0.0f && x[j] >= threshold ? fixed(x[j]) : 0;
  };
  each_sector(src, ring, add);
  block_sum(s, v);
  return v[0];
}

// --- The list: the row's survivors in shared memory, in index order ---

// Every sector whose code reaches that of bin `lowest` (so every sector holding a value of that bin or
// above), whole, in index order: thread t owns consecutive sectors, one block scan places them, cp.async
// copies them. The other values of those sectors come along; they lie below every threshold the list is
// asked about (below bin `lowest`), so no level or draw takes them. Returns the list's length, or -1 when
// the sectors do not fit.
__device__ __noinline__ int gather_sectors(Shared& s, const Source& row, const unsigned char* codes, int lowest) {
  const int sectors = (row.n + kPer - 1) / kPer, per = (sectors + kThreads - 1) / kThreads;
  const int begin = min(sectors, per * static_cast<int>(threadIdx.x)), end = min(sectors, begin + per);
  const int least = code_of(lowest);
  u64 own = 0;
  for (int i = begin; i < end; ++i) own += codes[i] >= least;
  u64 at, total;
  Scan(s.scan).ExclusiveSum(own, at, total);
  if (total * kPer > kSlots) {
    __syncthreads();
    return -1;
  }
  for (int i = begin; i < end; ++i) {
    if (codes[i] < least) continue;
    float4* to = reinterpret_cast<float4*>(s.value + at * kPer);
    copy_sector(row, i * kPer, to, to + 1);
    for (int j = 0; j < kPer; ++j) s.index[at * kPer + j] = i * kPer + j;
    ++at;
  }
  commit_copies();
  wait_copies<0>();
  __syncthreads();
  return static_cast<int>(total) * kPer;
}

// v1's compaction (rows too long for sector codes, or sectors that do not fit): every positive value of bin
// `lowest` or above, in index order, by a block scan per tile. Returns the list's length.
__device__ __noinline__ int gather_values(Shared& s, const Source& row, int lowest) {
  u64 carry = 0;
  for (int base = 0; base < row.n; base += kTile) {
    float v[kPer];
    const int first = base + kPer * threadIdx.x;
    row.load(first, v);
    unsigned flags = 0, own = 0;
    for (int j = 0; j < kPer; ++j)
      if (v[j] > 0.0f && static_cast<int>(__float_as_uint(v[j]) >> 20) >= lowest) flags |= 1u << j, ++own;
    u64 at, step;
    Scan(s.scan).ExclusiveSum(static_cast<u64>(own), at, step);
    at += carry;
    for (int j = 0; j < kPer; ++j)
      if (flags & (1u << j)) s.value[at] = v[j], s.index[at] = first + j, ++at;
    carry += step;
    __syncthreads();
  }
  return static_cast<int>(carry);
}

// --- The chunked draw: kept sets too large for the list ---

// One streamed pass: the mass of every positive value whose bits are at least `least` summed per chunk of
// kChunk elements into s.chunk (a warp's part of a step is one chunk); with kCollect the values below it in
// first-level bin `lowest` and their indices go to the list, in no particular order (only integer sums are
// taken over them), s.listed of them. Bits order like positive values: `least` is a threshold's bits.
template <bool kCollect>
__device__ __noinline__ void chunk_pass(Shared& s, const Source& source, float4* ring, unsigned least, int lowest) {
  const Source row = source;  // in registers
  if (threadIdx.x == 0) s.listed = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  stream(row, ring, [&](int first, const float (&v)[kPer]) {
    u64 sum = 0;
    unsigned take = 0;
    for (int j = 0; j < kPer; ++j) {
      if (!(v[j] > 0.0f)) continue;
      const unsigned bits = __float_as_uint(v[j]);
      if (bits >= least) sum += fixed(v[j]);
      else if (kCollect && static_cast<int>(bits >> 20) == lowest) take |= 1u << j;
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(~0u, sum, offset);
    if (lane == 0 && first < row.n) s.chunk[static_cast<unsigned>(first) / kChunk] = sum;
    if (kCollect) {
      const int mine = __popc(take);
      int upto = mine;  // inclusive over the warp's lanes
      for (int offset = 1; offset < 32; offset *= 2) {
        const int other = __shfl_up_sync(~0u, upto, offset);
        if (lane >= offset) upto += other;
      }
      int base = 0;
      if (lane == 31 && upto > 0) base = atomicAdd(&s.listed, upto);
      base = __shfl_sync(~0u, base, 31) + upto - mine;
      for (int j = 0; j < kPer; ++j)
        if (take >> j & 1u) s.value[base] = v[j], s.index[base] = first + j, ++base;
    }
  });
  __syncthreads();
}

// The inverse CDF over the chunk masses: the chunk holding u of the kept mass by one block scan (thread t
// holds consecutive chunks), then the token inside it by one warp scan over the chunk's values at least
// `threshold` (the values the chunk masses sum). The same token as v1's draw over the row. 0 when nothing
// is kept (a row of zeros).
__device__ __noinline__ int draw_chunks(Shared& s, const Source& row, float threshold, double u) {
  const int chunks = (row.n + kChunk - 1) / kChunk, per = (chunks + kThreads - 1) / kThreads;
  const int begin = min(chunks, per * static_cast<int>(threadIdx.x)), end = min(chunks, begin + per);
  u64 own = 0;
  for (int c = begin; c < end; ++c) own += s.chunk[c];
  u64 before, kept;
  Scan(s.scan).ExclusiveSum(own, before, kept);
  if (kept == 0) return 0;
  const u64 target = target_of(u, kept);
  if (before <= target && target < before + own) {
    for (int c = begin; c < end; ++c) {
      if (target < before + s.chunk[c]) {
        s.chosen = c, s.found_before = before;
        break;
      }
      before += s.chunk[c];
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x, first = s.chosen * kChunk + kPer * lane;
    float v[kPer];
    row.load(first, v);
    u64 m[kPer], mine = 0;
    for (int j = 0; j < kPer; ++j) mine += (m[j] = v[j] > 0.0f && v[j] >= threshold ? fixed(v[j]) : 0);
    u64 upto = mine;
    for (int offset = 1; offset < 32; offset *= 2) {
      const u64 other = __shfl_up_sync(~0u, upto, offset);
      if (lane >= offset) upto += other;
    }
    u64 at = s.found_before + upto - mine;
    if (at <= target && target < at + mine) {
      for (int j = 0; j < kPer; ++j) {
        if (target < at + m[j]) {
          s.found = first + j;
          break;
        }
        at += m[j];
      }
    }
  }
  __syncthreads();
  return s.found;
}

// The draw over the values of the row at least `threshold` (0: every positive one), kept mass `kept`.
__device__ int draw_row(Shared& s, const Source& row, float4* ring, bool fast, float threshold, u64 kept, double u) {
  if (!fast) return draw(s, row, threshold, target_of(u, kept));
  chunk_pass<false>(s, row, ring, __float_as_uint(threshold), -1);
  return draw_chunks(s, row, threshold, u);  // its kept mass is `kept` again
}

// No top-k, no top-p: every positive value is kept.
__device__ int draw_unfiltered(Shared& s, const Source& row, float4* ring, bool fast, double u) {
  if (fast) return draw_row(s, row, ring, true, 0.0f, 0, u);
  const u64 total = mass_at_least(s, row, ring, 0.0f);
  return total == 0 ? 0 : draw(s, row, 0.0f, target_of(u, total));
}

// Top-k, top-p and the draw over `src`, the list or the row. `lowest` is the first-level bin chosen over the
// row (the k-th value's with top-k, the top-p boundary's without), excl_count and excl_mass what lies above
// it (the mass only without top-k); `total` the row's mass (only without top-k).
__device__ int select_and_draw(Shared& s, const Source& src, float4* ring, bool fast, int k, float p, int lowest,
                               u64 excl_count, u64 excl_mass, u64 total, double u) {
  const bool use_k = k > 0, use_p = p < 1.0f;
  float threshold = 0.0f;
  u64 kept = total;
  if (use_k) {  // the k-th value by counts; the mass at least it summed over the source
    u64 ignored = 0;
    threshold = refine(s, src, ring, 1, static_cast<unsigned>(lowest), 0.0f, true, static_cast<u64>(k) - excl_count,
                       0, ignored, false);
    kept = mass_at_least(s, src, ring, threshold);
  }
  if (use_p) {
    const u64 limit = max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(kept)), u64{1});
    u64 above = 0;
    if (use_k) {  // inside K: from the first level, over the values at least the k-th
      threshold = refine(s, src, ring, 0, 0u, threshold, false, 0, limit, above, true);
    } else {  // the row's first level is the one chosen already: go on inside bin `lowest`
      above = excl_mass;
      threshold = refine(s, src, ring, 1, static_cast<unsigned>(lowest), 0.0f, false, 0, limit, above, true);
    }
    kept = above + s.bin_mass;
  }
  if (src.index) return draw(s, src, threshold, target_of(u, kept));
  return draw_row(s, src, ring, fast, threshold, kept, u);
}

// No top-k and a top-p boundary in a first-level bin too deep for the list to hold everything above it, but
// whose own values fit: in one pass the mass above that bin per chunk and the bin's values, then levels 2
// and 3 over those values, the kept ones of them added to their chunks, the chunked draw.
__device__ int draw_deep(Shared& s, const Source& row, float4* ring, int lowest, u64 excl_mass, u64 limit, double u) {
  chunk_pass<true>(s, row, ring, static_cast<unsigned>(lowest + 1) << 20, lowest);
  const Source list{s.value, s.index, s.listed, true};
  u64 above = excl_mass;
  const float threshold = refine(s, list, ring, 1, static_cast<unsigned>(lowest), 0.0f, false, 0, limit, above, true);
  for (int i = threadIdx.x; i < list.n; i += kThreads)
    if (s.value[i] >= threshold) atomicAdd(&s.chunk[s.index[i] / kChunk], fixed(s.value[i]));
  __syncthreads();
  return draw_chunks(s, row, threshold, u);
}

struct Row {
  const float* probs;
  long long row_stride;
  int vocab;
  const int32_t* top_k;
  long long k_stride;
  const float* top_p;
  long long p_stride;
  long long* out;
  long long out_stride;
  u64 seed;
  bool fast;      // vocab <= kFastVocab: sector codes and chunk masses fit on chip
  bool prefetch;  // B x V x 4 <= kPrefetchBytes
};

__device__ int sample_row(Shared& s, const Source& row, float4* ring, unsigned char* codes, const Row& r, int k_in,
                          float p) {
  const double u = philox_uniform(r.seed, blockIdx.x);
  const bool fast = codes != nullptr, maybe_k = k_in > 0 && k_in < row.n, use_p = p < 1.0f;
  if (!maybe_k && !use_p) return draw_unfiltered(s, row, ring, fast, u);

  // The first digit over the whole row: the bin of the k-th largest value (counts), or of the top-p
  // boundary (masses).
  bool masses = !maybe_k;
  if (masses)
    first_histogram<true>(s, row, ring, codes);
  else
    first_histogram<false>(s, row, ring, codes);
  Totals t = totals(s);
  if (t.big == 0) return 0;  // no mass anywhere: not a distribution; token 0 rather than garbage
  // A k at least the number of positive values keeps them all: no top-k (zeros are never drawn).
  const int k = maybe_k && static_cast<u64>(k_in) < t.positive ? k_in : 0;
  const bool use_k = k > 0;
  if (!use_k && !masses) {  // fewer positive values than k: the counts were not enough
    if (!use_p) return draw_unfiltered(s, row, ring, fast, u);
    first_histogram<true>(s, row, ring, codes);
    t = totals(s);
  }
  const u64 limit = use_p ? max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(t.mass)), u64{1}) : 0;
  choose(s, 0, use_k, static_cast<u64>(k), limit);
  const int lowest = s.chosen;
  const u64 excl_count = s.excl_count, excl_mass = s.excl_mass, bin_count = s.bin_count;

  int listed = fast ? gather_sectors(s, row, codes, lowest) : -1;
  if (listed < 0 && excl_count + bin_count <= kSlots) listed = gather_values(s, row, lowest);
  if (listed >= 0)
    return select_and_draw(s, Source{s.value, s.index, listed, true}, ring, fast, k, p, lowest, excl_count, excl_mass,
                           t.mass, u);
  if (fast && !use_k && bin_count <= kSlots) return draw_deep(s, row, ring, lowest, excl_mass, limit, u);
  return select_and_draw(s, row, ring, fast, k, p, lowest, excl_count, excl_mass, t.mass, u);
}

__global__ void __launch_bounds__(kThreads, 1) sample_rows(Row r) {
  extern __shared__ __align__(16) unsigned char shared[];
  Shared& s = *reinterpret_cast<Shared*>(shared);
  float4* ring = reinterpret_cast<float4*>(shared + kRingOffset);
  unsigned char* codes = r.fast ? shared + kRingOffset + kRingBytes : nullptr;
  const float* x = r.probs + static_cast<long long>(blockIdx.x) * r.row_stride;
  if (r.prefetch) prefetch_row(x, r.vocab);
  const Source row{x, nullptr, r.vocab, (reinterpret_cast<uintptr_t>(x) & 15) == 0};
  const int token = sample_row(s, row, ring, codes, r, r.top_k[blockIdx.x * r.k_stride], r.top_p[blockIdx.x * r.p_stride]);
  if (threadIdx.x == 0) r.out[blockIdx.x * r.out_stride] = token;
}

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (list[i].name && std::strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* probs = find(call->inputs, call->num_inputs, "probs");
  const d2k_tensor* top_k = find(call->inputs, call->num_inputs, "top_k");
  const d2k_tensor* top_p = find(call->inputs, call->num_inputs, "top_p");
  const d2k_tensor* out = find(call->outputs, call->num_outputs, "token_ids");
  if (!probs || !top_k || !top_p || !out)
    return fail(call, "top_k_top_p: expected inputs 'probs', 'top_k', 'top_p' and output 'token_ids'");
  if (probs->dtype != D2K_FLOAT32 || top_k->dtype != D2K_INT32 || top_p->dtype != D2K_FLOAT32 || out->dtype != D2K_INT64)
    return fail(call, "top_k_top_p: expected probs f32, top_k i32, top_p f32, token_ids i64");
  if (probs->rank != 2 || probs->strides[1] != 1)
    return fail(call, "top_k_top_p: probs must be [B,V] with unit element stride");
  const long long rows = probs->shape[0], vocab = probs->shape[1];
  if (top_k->shape[0] != rows || top_p->shape[0] != rows || out->shape[0] != rows || vocab < 1 || vocab > (1 << 30))
    return fail(call, "top_k_top_p: top_k, top_p and token_ids must have B=%lld elements, 1 <= V <= 2^30", rows);
  Row r{};
  r.probs = static_cast<const float*>(probs->data);
  r.row_stride = probs->strides[0];
  r.vocab = static_cast<int>(vocab);
  r.top_k = static_cast<const int32_t*>(top_k->data);
  r.k_stride = top_k->strides[0];
  r.top_p = static_cast<const float*>(top_p->data);
  r.p_stride = top_p->strides[0];
  r.out = static_cast<long long*>(out->data);
  r.out_stride = out->strides[0];
  r.fast = vocab <= kFastVocab;
  r.prefetch = rows * vocab * 4 <= kPrefetchBytes;
  bool seeded = false;
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, "seed") == 0)
      r.seed = static_cast<u64>(call->scalars[i].i), seeded = true;
  if (!seeded) return fail(call, "top_k_top_p: no scalar 'seed'");
  if (rows == 0) return 0;
  // Dynamic shared memory: Shared, the ring, on fast rows a code byte per thread and step of the first pass.
  const size_t bytes = kRingOffset + kRingBytes + (r.fast ? static_cast<size_t>((vocab + kTile - 1) / kTile) * kThreads : 0);
  static size_t granted = 0;  // the largest size set so far (the attribute is per function)
  if (bytes > granted) {
    const cudaError_t e = cudaFuncSetAttribute(sample_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return fail(call, "top_k_top_p: %zu bytes of shared memory: %s", bytes, cudaGetErrorString(e));
    granted = bytes;
  }
  sample_rows<<<static_cast<unsigned>(rows), kThreads, bytes, static_cast<cudaStream_t>(call->stream)>>>(r);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return fail(call, "top_k_top_p: launch failed: %s", cudaGetErrorString(e));
  return 0;
}
