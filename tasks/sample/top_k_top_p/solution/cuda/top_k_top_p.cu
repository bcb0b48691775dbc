// sample/top_k_top_p: expert CUDA solution for the H200 (sm_90a), version 2.
//
// A row is split over a cluster of C CTAs (C = 16 for small batches, 8 otherwise), each holding its slice
// of the row in shared memory: the row is read from DRAM once and every later pass runs from shared
// memory. Histograms are per CTA and merged over the cluster through distributed shared memory, each CTA
// reducing 1/C of the bins.
//
// Per row, with positive floats ordered as their bit patterns:
//  1. Load the slice (16-byte loads), its maximum; the cluster's maximum M (one cluster barrier).
//  2. Level-0 histogram (bits 30..20: 8 bins per octave, count and fixed-point mass). Values below
//     M * 2^-14 take no atomics: they are summed in registers into one underflow bin just below the cut.
//     Merged over the cluster, the bin of the k-th largest value (top-k) or of the top-p boundary (no
//     top-k) is chosen; every kept token lies in that bin or above.
//  3. Usually a few hundred tokens lie there: each CTA compacts its own in index order, CTA 0 gathers the
//     list and finishes alone: a token is in K when fewer than k listed values exceed it, and kept when the
//     mass of K strictly above it is below p of K's mass (pairwise, exact integers), then the inverse CDF.
//  4. Otherwise (more than kCapacity candidates, or the answer below the cut) the radix refinement of
//     version 1 runs over the cluster (three digits for the k-th value, three for the top-p value), and
//     the draw scans the slices with a cluster-wide exclusive sum of the per-CTA kept masses.
// Rows that fit no cluster's shared memory run the same steps with the slices read from global memory.
//
// Masses are fixed point (probability x 2^40, truncated), summed as integers: exact in any order, so the
// result is deterministic. The draw: one uniform u from Philox-4x32-10 keyed on (seed, row), target =
// floor(u * kept), the first kept token in index order whose inclusive cumulative mass exceeds target
// (version 1's contract: the same seed gives the same tokens as version 1).
#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCapacity = 1024;          // candidates CTA 0 finishes alone
constexpr int kItems = kCapacity / kThreads;  // of them per thread, consecutive
constexpr int kMaxBins = 2048;
constexpr int kMinCluster = 8, kMaxCluster = 16;
constexpr int kMaxPlaces = kMaxBins / kMinCluster;  // bins one CTA merges
constexpr int kCutBins = 14 * 8;         // the cut: 14 octaves below the maximum's bin
constexpr float kFixed = 1099511627776.0f;  // 2^40
// The three digits of a positive float's bits (bit 31 is 0): 30..20, 19..9, 8..0.
__host__ __device__ constexpr int shift_of(int level) { return level == 0 ? 20 : level == 1 ? 9 : 0; }
__host__ __device__ constexpr int bins_of(int level) { return level == 2 ? 512 : 2048; }

using u64 = unsigned long long;

struct Pair {
  u64 count, mass;
};
struct PairSum {
  __device__ Pair operator()(const Pair& a, const Pair& b) const { return {a.count + b.count, a.mass + b.mass}; }
};
using Scan = cub::BlockScan<Pair, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
using Scan64 = cub::BlockScan<u64, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

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

// The chosen bin of one selection step, with the count and mass of the bins above it and its own.
struct Choice {
  int bin;
  u64 excl_count, excl_mass, bin_count, bin_mass;
};

struct Shared {
  union {
    struct {  // a CTA's histogram; a bin's mass = hi * 2^32 + lo
      unsigned count[kMaxBins], lo[kMaxBins], hi[kMaxBins];
    } hist;
    struct {  // the candidates, in index order (CTA 0 gathers every CTA's list here)
      float value[kCapacity];
      int index[kCapacity];
      u64 mass[kCapacity];
    } list;
  };
  Pair merged[kMaxPlaces], merged_excl[kMaxPlaces];  // this CTA's share of the merged bins, descending
  Pair range_total;            // published: the total of this CTA's share
  Pair ranges[kMaxCluster];    // every CTA's share, read back
  Choice choice;               // written by the CTA that owns the chosen bin into every CTA
  Pair totals;                 // the merged histogram's total
  unsigned max_bits;           // published: the slice's largest value (bits)
  int part_count;              // published: candidates in this CTA's list
  u64 part_mass;               // published: kept mass of this slice
  u64 warp_sum[kWarps];
  u64 scratch[kMaxCluster];
  int chosen, owner, found, offset[kMaxCluster + 1];
  u64 target;
  union {
    typename Scan::TempStorage pair;
    typename Scan64::TempStorage one;
  } scan;
};

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
  int slice;  // elements per CTA (a multiple of 4)
};

// The resident slice (dynamic shared memory).
extern __shared__ float4 resident[];

// The slice: in shared memory (resident) or in global memory.
template <bool kResident>
struct Slice {
  const float* x;  // global memory (not resident)
  int n;
  __device__ __forceinline__ float operator[](int i) const {
    if constexpr (kResident) return reinterpret_cast<const float*>(resident)[i];
    else return __ldg(x + i);
  }
};

__device__ __forceinline__ int digit(unsigned bits, int level) {
  return static_cast<int>((bits >> shift_of(level)) & static_cast<unsigned>(bins_of(level) - 1));
}

// Adds (count, mass) to a histogram bin: the low 32 bits of the mass with a carry into the high word.
__device__ __forceinline__ void bin_add(Shared& s, int d, unsigned count, u64 m) {
  atomicAdd(&s.hist.count[d], count);
  const unsigned lo = static_cast<unsigned>(m);
  unsigned hi = static_cast<unsigned>(m >> 32);
  if (lo) {
    const unsigned old = atomicAdd(&s.hist.lo[d], lo);
    hi += old + lo < old;
  }
  if (hi) atomicAdd(&s.hist.hi[d], hi);
}

__device__ __forceinline__ u64 warp_sum64(u64 v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The CTA's histogram at `level` of the positive values whose digits above `level` are `prefix` and that
// are at least `floor`; at level 0 the bins below `cut` are summed into bin cut - 1 without atomics.
template <bool kResident>
__device__ __forceinline__ void histogram(Shared& s, const Slice<kResident> x, int level, unsigned prefix, float floor,
                                       int cut) {
  for (int b = threadIdx.x; b < bins_of(level); b += kThreads) s.hist.count[b] = 0, s.hist.lo[b] = 0, s.hist.hi[b] = 0;
  __syncthreads();
  const int above = level == 0 ? 31 : shift_of(level - 1);
  unsigned under_count = 0;
  u64 under_mass = 0;
#pragma unroll 4
  for (int i = threadIdx.x; i < x.n; i += kThreads) {
    const float v = x[i];
    const unsigned bits = __float_as_uint(v);
    if (!(v > 0.0f) || v < floor || (bits >> above) != prefix) continue;
    const int d = digit(bits, level);
    if (d < cut) {
      ++under_count, under_mass += fixed(v);
      continue;
    }
    bin_add(s, d, 1u, fixed(v));
  }
  if (cut > 0) {
    under_count = __reduce_add_sync(0xffffffffu, under_count);
    under_mass = warp_sum64(under_mass);
    if ((threadIdx.x & 31) == 0 && under_count) bin_add(s, cut - 1, under_count, under_mass);
  }
}

// One selection step over the cluster, after every CTA's histogram (not yet synchronized). CTA r merges
// places [r P, r P + P) of the bins in descending order (P = bins / C); the totals of the shares give each
// share's exclusive count and mass, from which every CTA finds the share holding the answer; its owner
// picks the bin (by count: the first place whose inclusive count reaches `rank`; by mass: the last
// non-empty place whose exclusive mass is below `limit`) and writes the choice into every CTA.
// `decide` runs on every CTA with the merged totals and returns false when nothing is to be chosen.
template <typename Decide>
__device__ __forceinline__ bool cluster_choose(Shared& s, const cg::cluster_group& cluster, int level, Decide decide) {
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int bins = bins_of(level), P = bins / C;
  cluster.sync();  // every histogram complete
  Pair mine{0, 0};
  if (static_cast<int>(threadIdx.x) < P) {
    const int bin = bins - 1 - (rank * P + static_cast<int>(threadIdx.x));
    for (int r = 0; r < C; ++r) {
      const Shared* peer = cluster.map_shared_rank(&s, r);
      mine.count += peer->hist.count[bin];
      mine.mass += (static_cast<u64>(peer->hist.hi[bin]) << 32) + peer->hist.lo[bin];
    }
    s.merged[threadIdx.x] = mine;
  }
  Pair excl, total;
  Scan(s.scan.pair).ExclusiveScan(mine, excl, Pair{0, 0}, PairSum(), total);
  if (static_cast<int>(threadIdx.x) < P) s.merged_excl[threadIdx.x] = excl;
  if (threadIdx.x == 0) s.range_total = total;
  cluster.sync();  // every share merged; the histograms may be overwritten from here on
  if (static_cast<int>(threadIdx.x) < C) s.ranges[threadIdx.x] = cluster.map_shared_rank(&s, static_cast<int>(threadIdx.x))->range_total;
  __syncthreads();
  Pair all{0, 0};
  for (int r = 0; r < C; ++r) all.count += s.ranges[r].count, all.mass += s.ranges[r].mass;
  bool by_count;
  u64 want;  // the rank (by count) or the limit (by mass)
  const bool choose = decide(all, by_count, want);
  if (choose) {
    // The owner: by count, the share where the inclusive count reaches the rank; by mass, the last
    // non-empty share whose exclusive mass is below the limit.
    Pair before{0, 0}, owner_before{0, 0};
    int owner = -1;
    for (int r = 0; r < C; ++r) {
      const Pair t = s.ranges[r];
      if (by_count ? (owner < 0 && before.count + t.count >= want) : (t.count > 0 && before.mass < want))
        owner = r, owner_before = before;
      before.count += t.count, before.mass += t.mass;
    }
    if (owner == rank) {
      if (threadIdx.x == 0) s.chosen = -1;
      __syncthreads();
      const int t = static_cast<int>(threadIdx.x);
      Pair here{0, 0}, ex{0, 0};
      if (t < P) {
        here = s.merged[t], ex = s.merged_excl[t];
        ex.count += owner_before.count, ex.mass += owner_before.mass;
        if (here.count > 0 && (by_count ? ex.count < want && ex.count + here.count >= want : ex.mass < want))
          atomicMax(&s.chosen, t);
      }
      __syncthreads();
      if (t < P && t == s.chosen) {
        const Choice c{bins - 1 - (rank * P + t), ex.count, ex.mass, here.count, here.mass};
        for (int r = 0; r < C; ++r) cluster.map_shared_rank(&s, r)->choice = c;
      }
    }
  }
  if (threadIdx.x == 0) s.totals = all;
  cluster.sync();  // the choice everywhere
  return choose;
}

// The draw over the slices: the first positive value at least `threshold`, in index order over the row,
// whose inclusive cumulative mass exceeds floor(u * kept), kept being the mass of all such values. Warp w
// of every CTA owns a contiguous chunk of the slice. Ends with a cluster barrier (no CTA leaves while its
// shared memory may be read).
template <bool kResident>
__device__ __forceinline__ void cluster_draw(Shared& s, const cg::cluster_group& cluster, const Slice<kResident> x,
                                          float threshold, const Row& r, unsigned row, int begin) {
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunk = ((x.n + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int first = warp * chunk, last = min(first + chunk, x.n);
  u64 own = 0;
  for (int i = first + lane; i < last; i += 32) {
    const float v = x[i];
    if (v > 0.0f && v >= threshold) own += fixed(v);
  }
  own = warp_sum64(own);
  if (lane == 0) s.warp_sum[warp] = own;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 t = 0;
    for (int w = 0; w < kWarps; ++w) t += s.warp_sum[w];
    s.part_mass = t;
  }
  cluster.sync();
  if (static_cast<int>(threadIdx.x) < C) s.scratch[threadIdx.x] = cluster.map_shared_rank(&s, static_cast<int>(threadIdx.x))->part_mass;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 kept = 0;
    for (int q = 0; q < C; ++q) kept += s.scratch[q];
    const double u = philox_uniform(r.seed, row);
    u64 target = static_cast<u64>(u * static_cast<double>(kept));
    if (target >= kept) target = kept > 0 ? kept - 1 : 0;
    // The CTA holding the target, then its warp; `target` becomes relative to that warp's chunk.
    s.owner = -1;
    u64 before = 0;
    for (int q = 0; q < C && s.owner < 0; ++q) {
      if (target < before + s.scratch[q]) s.owner = q;
      else before += s.scratch[q];
    }
    s.found = -1;
    if (s.owner == rank) {
      target -= before;
      for (int w = 0; w < kWarps; ++w) {
        if (target < s.warp_sum[w]) {
          s.found = w;
          break;
        }
        target -= s.warp_sum[w];
      }
    }
    s.target = target;
    if (kept == 0 && rank == 0) r.out[row * r.out_stride] = 0;  // no mass at all: not a distribution
  }
  __syncthreads();
  if (s.owner == rank && warp == s.found) {
    u64 carry = 0;
    const u64 target = s.target;
    for (int base = first; base < last; base += 32) {
      const int i = base + lane;
      const float v = i < last ? x[i] : 0.0f;
      const u64 m = v > 0.0f && v >= threshold ? fixed(v) : 0;
      u64 incl = m;
      for (int o = 1; o < 32; o <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      const unsigned hit = __ballot_sync(0xffffffffu, m > 0 && target < carry + incl);
      if (hit) {
        if (lane == __ffs(hit) - 1) r.out[row * r.out_stride] = begin + i;
        break;
      }
      carry += __shfl_sync(0xffffffffu, incl, 31);
    }
  }
  cluster.sync();
}

// CTA 0 alone, over the gathered candidates (n <= kCapacity, thread t owns items kItems t to kItems t +
// kItems - 1): K by the count of larger listed values, top-p by the mass of K strictly above, the draw by
// a block scan in list (index) order.
__device__ __forceinline__ void finish_list(Shared& s, int n, int k, float p, u64 all_mass, const Row& r, unsigned row) {
  const int t = static_cast<int>(threadIdx.x);
  float v[kItems];
  bool keep[kItems];
  for (int h = 0; h < kItems; ++h) {
    keep[h] = kItems * t + h < n;
    v[h] = keep[h] ? s.list.value[kItems * t + h] : 0.0f;
  }
  if (k > 0) {
    int greater[kItems] = {};
    for (int j = 0; j < n; ++j) {
      const float y = s.list.value[j];
      for (int h = 0; h < kItems; ++h) greater[h] += y > v[h];
    }
    for (int h = 0; h < kItems; ++h) keep[h] = keep[h] && greater[h] < k;
  }
  u64 m[kItems], own = 0;
  for (int h = 0; h < kItems; ++h) {
    m[h] = keep[h] ? fixed(v[h]) : 0;
    own += m[h];
    if (kItems * t + h < n) s.list.mass[kItems * t + h] = m[h];
  }
  __syncthreads();
  if (p < 1.0f) {
    // The mass of K: the listed part of it with top-k, the whole positive mass without.
    u64 kept_k = all_mass;
    if (k > 0) {
      u64 ignored;
      Scan64(s.scan.one).ExclusiveSum(own, ignored, kept_k);
      __syncthreads();
    }
    const u64 limit = max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(kept_k)), u64{1});
    u64 above[kItems] = {};
    for (int j = 0; j < n; ++j) {
      const float y = s.list.value[j];
      const u64 mj = s.list.mass[j];
      for (int h = 0; h < kItems; ++h) above[h] += y > v[h] ? mj : 0;
    }
    own = 0;
    for (int h = 0; h < kItems; ++h) {
      if (!(above[h] < limit)) m[h] = 0;
      own += m[h];
    }
  }
  u64 before, kept;
  Scan64(s.scan.one).ExclusiveSum(own, before, kept);
  const double u = philox_uniform(r.seed, row);
  u64 target = static_cast<u64>(u * static_cast<double>(kept));
  if (target >= kept) target = kept > 0 ? kept - 1 : 0;
  if (kept == 0 && t == 0) r.out[row * r.out_stride] = n > 0 ? s.list.index[0] : 0;
  for (int h = 0; h < kItems; ++h) {
    if (m[h] > 0 && before <= target && target < before + m[h]) r.out[row * r.out_stride] = s.list.index[kItems * t + h];
    before += m[h];
  }
}

// Steps 1 (the cluster's maximum) to 4; returns the draw's threshold, or -1 when CTA 0 has drawn from
// the candidate list.
template <bool kResident>
__device__ __forceinline__ float select(Shared& s, const cg::cluster_group& cluster, const Slice<kResident> x,
                                        const Row& r, unsigned row, int begin, int k_in, float p, bool maybe_k,
                                        bool use_p) {
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int n = x.n;
  cluster.sync();
  if (static_cast<int>(threadIdx.x) < C) s.scratch[threadIdx.x] = cluster.map_shared_rank(&s, static_cast<int>(threadIdx.x))->max_bits;
  __syncthreads();
  unsigned top = 0;
  for (int q = 0; q < C; ++q) top = max(top, static_cast<unsigned>(s.scratch[q]));
  const int cut = max(static_cast<int>(top >> 20) - kCutBins, 0);

  // 2. The level-0 histogram and the first choice.
  int k = 0;
  u64 positive_mass = 0;
  histogram(s, x, 0, 0u, 0.0f, cut);
  const bool chosen = cluster_choose(s, cluster, 0, [&](const Pair& all, bool& by_count, u64& want) {
    k = maybe_k && static_cast<u64>(k_in) < all.count ? k_in : 0;  // k >= the positive values: no top-k
    positive_mass = all.mass;
    by_count = k > 0;
    want = k > 0 ? static_cast<u64>(k)
                 : max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(all.mass)), u64{1});
    return all.count > 0 && (k > 0 || use_p);
  });
  // No positive value (the draw writes token 0), or k kept every positive value and p = 1.
  if (!chosen) return 0.0f;
  const Choice& c = s.choice;  // read from shared memory where used: registers are scarce
  const bool under = cut > 0 && c.bin == cut - 1;  // the answer lies below the cut: not a real bin
  const u64 candidates = c.excl_count + c.bin_count;

  if (!under && candidates <= kCapacity) {
    // 3. Compact this slice's candidates in index order (warp chunks, ballots), gather them in CTA 0.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int chunk = ((n + kWarps - 1) / kWarps + 31) / 32 * 32;
    const int first = warp * chunk, last = min(first + chunk, n);
    int own = 0;
    for (int base = first; base < last; base += 32) {
      const float v = base + lane < last ? x[base + lane] : 0.0f;
      own += __popc(__ballot_sync(0xffffffffu, v > 0.0f && static_cast<int>(__float_as_uint(v) >> 20) >= c.bin));
    }
    if (lane == 0) s.offset[warp] = own;
    __syncthreads();
    if (threadIdx.x == 0) {
      int at = 0;
      for (int w = 0; w < kWarps; ++w) {
        const int cnt = s.offset[w];
        s.offset[w] = at, at += cnt;
      }
      s.part_count = at;
    }
    __syncthreads();
    int at = s.offset[warp];
    for (int base = first; base < last; base += 32) {
      const float v = base + lane < last ? x[base + lane] : 0.0f;
      const bool take = v > 0.0f && static_cast<int>(__float_as_uint(v) >> 20) >= c.bin;
      const unsigned ballot = __ballot_sync(0xffffffffu, take);
      if (take) {
        const int slot = at + __popc(ballot & ((1u << lane) - 1));
        s.list.value[slot] = v, s.list.index[slot] = begin + base + lane;
      }
      at += __popc(ballot);
    }
    cluster.sync();
    if (rank == 0) {
      if (static_cast<int>(threadIdx.x) < C) s.scratch[threadIdx.x] = cluster.map_shared_rank(&s, static_cast<int>(threadIdx.x))->part_count;
      __syncthreads();
      if (threadIdx.x == 0) {
        int total = 0;
        for (int q = 0; q < C; ++q) s.offset[q] = total, total += static_cast<int>(s.scratch[q]);
        s.offset[C] = total;
      }
      __syncthreads();
      for (int q = 1; q < C; ++q) {
        const Shared* peer = cluster.map_shared_rank(&s, q);
        const int from = s.offset[q], cnt = s.offset[q + 1] - from;
        for (int j = threadIdx.x; j < cnt; j += kThreads)
          s.list.value[from + j] = peer->list.value[j], s.list.index[from + j] = peer->list.index[j];
      }
    }
    cluster.sync();  // the peers' lists read: they may leave
    if (rank == 0) finish_list(s, s.offset[C], k, p, positive_mass, r, row);
    return -1.0f;
  }

  // 4. The general path: radix refinement over the cluster, then the draw over the slices.
  float threshold = 0.0f;
  u64 kept = positive_mass;
  if (k > 0) {
    if (under) {
      histogram(s, x, 0, 0u, 0.0f, 0);
      cluster_choose(s, cluster, 0, [&](const Pair&, bool& by_count, u64& want) {
        by_count = true, want = static_cast<u64>(k);
        return true;
      });
    }
    u64 rank_left = static_cast<u64>(k) - c.excl_count, above = c.excl_mass;
    unsigned prefix = static_cast<unsigned>(c.bin);
    for (int level = 1; level < 3; ++level) {
      histogram(s, x, level, prefix, 0.0f, 0);
      cluster_choose(s, cluster, level, [&](const Pair&, bool& by_count, u64& want) {
        by_count = true, want = rank_left;
        return true;
      });
      rank_left -= c.excl_count, above += c.excl_mass;
      prefix = (prefix << (level == 2 ? 9 : 11)) | static_cast<unsigned>(c.bin);
    }
    threshold = __uint_as_float(prefix);
    kept = above + c.bin_mass;
  }
  if (use_p) {
    const u64 limit = max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(kept)), u64{1});
    if (k > 0 || under) {
      histogram(s, x, 0, 0u, threshold, 0);
      cluster_choose(s, cluster, 0, [&](const Pair&, bool& by_count, u64& want) {
        by_count = false, want = limit;
        return true;
      });
    }
    u64 above = c.excl_mass;
    unsigned prefix = static_cast<unsigned>(c.bin);
    for (int level = 1; level < 3; ++level) {
      histogram(s, x, level, prefix, threshold, 0);
      cluster_choose(s, cluster, level, [&](const Pair&, bool& by_count, u64& want) {
        by_count = false, want = limit - above;
        return true;
      });
      above += c.excl_mass;
      prefix = (prefix << (level == 2 ? 9 : 11)) | static_cast<unsigned>(c.bin);
    }
    threshold = __uint_as_float(prefix);
  }
  return threshold;
}

template <bool kResident>
__global__ void __launch_bounds__(kThreads, 2) sample_rows(Row r) {
  __shared__ Shared s;
  const cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const unsigned row = blockIdx.x / C;
  const int begin = rank * r.slice;
  const int n = max(0, min(r.slice, r.vocab - begin));
  const float* g = r.probs + static_cast<long long>(row) * r.row_stride + begin;
  const int k_in = r.top_k[row * r.k_stride];
  const float p = r.top_p[row * r.p_stride];

  // 1. The slice (into shared memory when resident) and its largest value.
  unsigned max_bits = 0;
  Slice<kResident> x{nullptr, n};
  if constexpr (kResident) {
    float* dst = reinterpret_cast<float*>(resident);
    if ((reinterpret_cast<uintptr_t>(g) & 15) == 0) {
      const int n4 = n / 4;
#pragma unroll 8
      for (int i = threadIdx.x; i < n4; i += kThreads) {
        const float4 q = __ldcs(reinterpret_cast<const float4*>(g) + i);
        resident[i] = q;
        max_bits = max(max_bits, max(max(__float_as_uint(fmaxf(q.x, 0.0f)), __float_as_uint(fmaxf(q.y, 0.0f))),
                                     max(__float_as_uint(fmaxf(q.z, 0.0f)), __float_as_uint(fmaxf(q.w, 0.0f)))));
      }
      for (int i = 4 * n4 + threadIdx.x; i < n; i += kThreads) {
        const float v = __ldcs(g + i);
        dst[i] = v;
        max_bits = max(max_bits, __float_as_uint(fmaxf(v, 0.0f)));
      }
    } else {
#pragma unroll 4
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const float v = __ldcs(g + i);
        dst[i] = v;
        max_bits = max(max_bits, __float_as_uint(fmaxf(v, 0.0f)));
      }
    }
  } else {
    x.x = g;
    for (int i = threadIdx.x; i < n; i += kThreads) max_bits = max(max_bits, __float_as_uint(fmaxf(x[i], 0.0f)));
  }
  max_bits = __reduce_max_sync(0xffffffffu, max_bits);
  if (threadIdx.x == 0) s.max_bits = 0;
  __syncthreads();
  if (threadIdx.x % 32 == 0) atomicMax(&s.max_bits, max_bits);

  const bool maybe_k = k_in > 0 && k_in < r.vocab, use_p = p < 1.0f;
  float threshold = 0.0f;  // the draw's: every positive value at least it is kept
  if (maybe_k || use_p) threshold = select(s, cluster, x, r, row, begin, k_in, p, maybe_k, use_p);
  else __syncthreads();  // no filter
  if (threshold < 0.0f) return;  // drawn from the candidate list
  cluster_draw(s, cluster, x, threshold, r, row, begin);
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

// The largest dynamic shared memory a CTA may take beside the static part, and whether clusters of 16
// can be launched (a non-portable size, checked once).
constexpr int kMaxDynamic = 227 * 1024 - static_cast<int>(sizeof(Shared));

template <bool kResident>
cudaError_t launch(const Row& r, long long rows, int cluster, cudaStream_t stream) {
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows * cluster));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kResident ? static_cast<size_t>(r.slice) * sizeof(float) : 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, sample_rows<kResident>, r);
}

// Sets the kernels' attributes once; returns whether clusters of 16 can be launched.
bool prepare() {
  static const bool wide = [] {
    cudaFuncSetAttribute(sample_rows<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxDynamic);
    bool ok = cudaFuncSetAttribute(sample_rows<true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
              cudaFuncSetAttribute(sample_rows<false>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    if (ok) {
      // Clusters of 16 CTAs with a resident slice of a 152k-float row: one must fit on the device.
      cudaLaunchAttribute attribute;
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = kMaxCluster;
      attribute.val.clusterDim.y = 1;
      attribute.val.clusterDim.z = 1;
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(kMaxCluster);
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = 40 * 1024;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int clusters = 0;
      ok = cudaOccupancyMaxActiveClusters(&clusters, sample_rows<true>, &config) == cudaSuccess && clusters > 0;
    }
    cudaGetLastError();  // clear a refused attribute or query
    return ok;
  }();
  return wide;
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
  bool seeded = false;
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, "seed") == 0)
      r.seed = static_cast<u64>(call->scalars[i].i), seeded = true;
  if (!seeded) return fail(call, "top_k_top_p: no scalar 'seed'");
  if (rows == 0) return 0;
  // Clusters of 16 while 16 B CTAs leave SMs idle (B <= 32), else 8 (the portable size).
  const bool wide = prepare();
  const int cluster = rows <= 32 && wide ? kMaxCluster : kMinCluster;
  const long long per = (vocab + cluster - 1) / cluster;
  r.slice = static_cast<int>((per + 3) / 4 * 4);
  const cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const bool fits = static_cast<long long>(r.slice) * 4 <= kMaxDynamic;
  cudaError_t e = fits ? launch<true>(r, rows, cluster, stream) : launch<false>(r, rows, cluster, stream);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) return fail(call, "top_k_top_p: launch failed: %s", cudaGetErrorString(e));
  return 0;
}
