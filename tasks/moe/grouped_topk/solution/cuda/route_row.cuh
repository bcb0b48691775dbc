// moe/grouped_topk, version 3: one token row per warp. The per-row algorithm lives here, written once for
// the device kernel (grouped_topk.cu) and for a host emulation that runs the same source lane by lane with
// the warp's collectives simulated (a test harness supplies its own Warp type).
//
// Mapping (as v2): lane l holds N consecutive experts. A group occupies m = 32 / (groups rounded up to a
// power of two) consecutive lanes, N = ceil(E / groups / m) experts a lane; for DeepSeek-V3 (256 experts, 8
// groups) 4 lanes a group, 8 experts a lane, and the warp's 32 lanes read the row's 1 KB contiguously. A
// lower lane always holds lower expert indices, so "lowest lane" breaks ties the way "lowest index" does.
//
// v3 keeps v2's float operations (so its outputs are bit-identical to v2's) and shortens the row's chain:
//   1. s = 1 / (1 + __expf(-x)), c = s + bias, for all N experts at once without a branch per element: the
//      exponential as ex2.approx.ftz (equal to v2's ex2.approx wherever the result matters, see exp2_ftz)
//      and the reciprocal as the MUFU.RCP + two-FMA sequence that ptxas emits for v2's IEEE division on
//      its fast path (rcp_fast); one check per lane sends a lane with any 1 + e >= 2^126 (x < -87) to the
//      IEEE division instead. Each lane writes its s to the warp's shared buffer (read once, at the end).
//   2. The lane's best three (c, slot) by an insertion scan of selects (lower slot among equal values); its
//      best two are the lane's share of the group's top two, merged over the group's m lanes by log2(m)
//      xor shuffles (v1's fmin/fmax merge).
//   3. The group's rank: each lane compares its group with groups/m others (two for DeepSeek-V3), one
//      shuffle each, and a ballot per comparison gives every group its count of better groups by a popc
//      of its own lanes' bits: 2 shuffles + 2 ballots instead of v2's 8 serial shuffles.
//   4. k rounds, each one warp max reduction (redux.sync) over the exact integer image of the offered c,
//      a ballot of the lanes offering it, and "no lower lane offers it" (the ballot and %lanemask_lt) for
//      the winner: no find-first-set, no shuffle and no branch on a round's path. The winner records its
//      expert id in shared memory at the round's slot and steps to its next cached entry by selects (a
//      cache of three); a lane winning a third time (or more) rescans its c in a branch: 0.035 rescans a
//      row for normal logits, 0.11 for the ties workload (v2 rescanned from a lane's second win: 0.78 and
//      1.15 a row).
//   5. After one __syncwarp, lane j < k reads round j's id and that expert's s from shared memory, every
//      lane sums the k scores in round order through k shuffles (v2's order and operations), and lane j
//      stores weight j and id j: one coalesced store each.
// DeepSeek-V3's shape (its 4 kept groups hold 128 experts, 4 a lane) takes route_loaded_spread instead of
// steps 2 and 4: the lane's best two values only, then the kept groups' experts spread over all 32 lanes
// (4 consecutive experts a lane, in index order, their c read back from shared memory), sorted by five
// compare-exchanges, and rounds that step through all four without a rescan or a branch.
#pragma once

#include <cstdint>

#ifndef __CUDACC__
#include <cmath>
#include <cstring>
#define __host__
#define __device__
#define __forceinline__ inline
#endif

namespace gtopk {

struct Problem {
  const float* logits;
  long long l_row, l_col;
  const float* bias;
  long long b_stride;
  float* weights;
  long long w_row, w_col;
  int32_t* ids;
  long long i_row, i_col;
  long long T;
  int E, groups, keep, k;
  int per_group;    // experts per group
  int lane_shift;   // log2(m), m = lanes per group, a power of two
  int per_lane;     // N: experts a lane holds (consecutive), at most the kernel's template NT
  int group_slots;  // 32 / m: the groups rounded up to a power of two
  int renormalize;
  float scale;
  bool vector_loads;  // 16-byte loads of a lane's N logits and biases (N = NT, a multiple of 4)
};

// 2^v as ex2.approx.ftz.f32 (a single MUFU.EX2). v2's __expf is ex2.approx.f32, which differs only where
// v < -126 (it keeps a subnormal result, ftz flushes it): there e = 2^v < 2^-126 and 1 + e rounds to 1
// either way, so the scores are the same bits.
__host__ __device__ __forceinline__ float exp2_ftz(float v) {
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
#else
  // The host emulation's stand-in for the hardware exponential: not bit-equal to it, but the same function
  // of the same argument as the emulation of v2 uses, which is what the bit comparison needs.
  return std::exp2f(v);
#endif
}

// 1 / y for y in [1, 2^126): the fast path that ptxas (CUDA 13.0, sm_90a) emits for v2's IEEE division
// 1.0f / y, instruction for instruction: MUFU.RCP r; FFMA d = y r - 1; FFMA r - r d (v2 negates d with an
// FADD.FTZ first; d is 0 or at least 2^-47 in magnitude, never subnormal, so the FTZ changes nothing). The
// division takes that path exactly when y's exponent is not 253, 254, 255 or 0, which for y >= 1 means
// y < 2^126; route_row checks that before it keeps the result.
__host__ __device__ __forceinline__ float rcp_fast(float y) {
#ifdef __CUDA_ARCH__
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  const float d = fmaf(y, r, -1.0f);
  return fmaf(r, -d, r);
#else
  // Outside the range the device's sequence is not the IEEE result: the stand-in returns NaN there, so
  // that a missing range check shows in the emulation's comparison.
  return y < 0x1p126f ? 1.0f / y : NAN;
#endif
}

__host__ __device__ __forceinline__ int float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_int(x);
#else
  int b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

__host__ __device__ __forceinline__ float bits_float(int b) {
#ifdef __CUDA_ARCH__
  return __int_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

__host__ __device__ __forceinline__ int popc(unsigned v) {
#ifdef __CUDA_ARCH__
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}

__host__ __device__ __forceinline__ int clz(unsigned v) {
#ifdef __CUDA_ARCH__
  return __clz(static_cast<int>(v));
#else
  return v == 0 ? 32 : __builtin_clz(v);
#endif
}

// An exact order-preserving image of a float as a signed integer: a < b exactly when key(a) < key(b), and
// a == b exactly when key(a) == key(b), for every non-NaN value (adding +0 first turns -0 into +0, the only
// pair of equal floats with different bits). No rounding: the integer is the float's own bits.
__host__ __device__ __forceinline__ int order_key(float x) {
  const int b = float_bits(x + 0.0f);
  return b ^ ((b >> 31) & 0x7fffffff);
}

// The inverse of order_key (the same bit flip: it keeps the sign bit, so applying it twice is the identity).
__host__ __device__ __forceinline__ float key_value(int key) { return bits_float(key ^ ((key >> 31) & 0x7fffffff)); }

// Below every key of a number (order_key(-inf) is 0x807fffff): the offer of a lane whose group is dropped.
constexpr int kNoKey = static_cast<int>(0x80000000u);

__host__ __device__ __forceinline__ float load(const float* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

struct Four {
  float x, y, z, w;
};

__host__ __device__ __forceinline__ Four load4(const float* p) {
#ifdef __CUDA_ARCH__
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return {v.x, v.y, v.z, v.w};
#else
  return {p[0], p[1], p[2], p[3]};
#endif
}

// 16 bytes of shared memory (written by other lanes before a __syncwarp): a plain load, not __ldg.
__host__ __device__ __forceinline__ Four load4_shared(const float* p) {
#ifdef __CUDA_ARCH__
  const float4 v = *reinterpret_cast<const float4*>(p);
  return {v.x, v.y, v.z, v.w};
#else
  return {p[0], p[1], p[2], p[3]};
#endif
}

__host__ __device__ __forceinline__ void store4(float* p, float a, float b, float c, float d) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
#else
  p[0] = a, p[1] = b, p[2] = c, p[3] = d;
#endif
}

// (c, index) is better than (oc, oindex): larger c, or equal c and lower index.
__host__ __device__ __forceinline__ bool better(float c, int index, float oc, int oindex) {
  return c > oc || (c == oc && index < oindex);
}

// A lane's best three (value, slot): v1 >= v2 >= v3, and among equal values the lower slot first (v2's
// order). Missing entries (a lane of fewer than three experts) are (-inf, NT).
struct Top3 {
  float v1, v2, v3;
  int i1, i2, i3;
};

// An insertion scan in slot order: a later slot enters ahead of an entry only if strictly larger, so equal
// values keep their slot order. Selects only (the indices are compile-time: no register is indexed at run
// time, and no branch).
template <int NT>
__host__ __device__ __forceinline__ Top3 lane_top3(const float (&c)[NT]) {
  Top3 r{c[0], -INFINITY, -INFINITY, 0, NT, NT};
#pragma unroll
  for (int i = 1; i < NT; ++i) {
    const float x = c[i];
    const bool p1 = x > r.v1, p2 = x > r.v2, p3 = x > r.v3;
    r.v3 = p2 ? r.v2 : (p3 ? x : r.v3);
    r.i3 = p2 ? r.i2 : (p3 ? i : r.i3);
    r.v2 = p1 ? r.v1 : (p2 ? x : r.v2);
    r.i2 = p1 ? r.i1 : (p2 ? i : r.i2);
    r.v1 = p1 ? x : r.v1;
    r.i1 = p1 ? i : r.i1;
  }
  return r;
}

// A lane's place in a row (the same for every row): the experts it holds, its group and its lanes; and its
// loads.
// FULL: every lane holds exactly NT experts (E = 32 NT, groups a power of two), so no slot is padding.
// GSC: the group slots at compile time (0: p.group_slots at run time). KC: k at compile time (0: p.k).
template <int NT, bool FULL, int GSC, int KC>
struct LaneMap {
  static_assert(!FULL || NT % 4 == 0, "a full lane loads its experts 4 at a time");
  static_assert(GSC == 0 || (GSC >= 1 && GSC <= 32 && (GSC & (GSC - 1)) == 0), "group slots: a power of two");
  static constexpr int kLs = GSC == 0 ? -1 : (GSC == 1 ? 5 : GSC == 2 ? 4 : GSC == 4 ? 3 : GSC == 8 ? 2 : GSC == 16 ? 1 : 0);
  int ls, gslots, groups, k, m, g, q, first, count;

  __host__ __device__ __forceinline__ LaneMap(const Problem& p, int lane) {
    ls = GSC != 0 ? kLs : p.lane_shift;
    gslots = GSC != 0 ? GSC : p.group_slots;
    groups = (FULL && GSC != 0) ? GSC : p.groups;
    k = KC != 0 ? KC : p.k;
    m = 1 << ls;
    g = lane >> ls, q = lane & (m - 1);
    const int per_lane = FULL ? NT : p.per_lane;
    first = g * (FULL ? NT * m : p.per_group) + q * per_lane;  // expert of slot 0
    count = NT;
    if (!FULL) {
      count = p.per_group - q * p.per_lane;
      count = count < 0 ? 0 : (count > p.per_lane ? p.per_lane : count);
      if (g >= p.groups) count = 0;
    }
  }

  __host__ __device__ __forceinline__ bool vector(const Problem& p) const {
    if constexpr (NT % 4 != 0) {
      return false;
    } else {
      return FULL || (p.vector_loads && count == NT);
    }
  }

  // The bias and row t's logits, each 16-byte load of the bias next to one of the logits (as v2).
  __host__ __device__ __forceinline__ void load_both(const Problem& p, long long t, float (&b)[NT],
                                                     float (&x)[NT]) const {
    const float* row = p.logits + t * p.l_row;
    if (vector(p)) {
#pragma unroll
      for (int i = 0; i < NT / 4; ++i) {
        const Four w = load4(p.bias + first + 4 * i), v = load4(row + first + 4 * i);
        b[4 * i] = w.x, b[4 * i + 1] = w.y, b[4 * i + 2] = w.z, b[4 * i + 3] = w.w;
        x[4 * i] = v.x, x[4 * i + 1] = v.y, x[4 * i + 2] = v.z, x[4 * i + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        b[i] = i < count ? gtopk::load(p.bias + (first + i) * p.b_stride) : 0.0f;
        x[i] = i < count ? gtopk::load(row + (first + i) * p.l_col) : 0.0f;
      }
    }
  }
};

// Step 1 for one lane: s = 1 / (1 + __expf(-x)) and c = s + bias for its NT experts at once (padding slots:
// s 0, c -inf).
template <int NT, bool FULL>
__host__ __device__ __forceinline__ void scores(const float (&x)[NT], const float (&b)[NT], int count, float (&s)[NT],
                                                float (&c)[NT]) {
  float y[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i) y[i] = 1.0f + exp2_ftz(x[i] * -1.4426950408889634f);  // v2: 1 + __expf(-x)
  float ymax = y[0];
#pragma unroll
  for (int i = 1; i < NT; ++i) ymax = fmaxf(ymax, y[i]);
#pragma unroll
  for (int i = 0; i < NT; ++i) s[i] = rcp_fast(y[i]);
  if (!(ymax < 0x1p126f)) {  // some x < -87 (or NaN): the IEEE division, as v2 computes every score
#pragma unroll
    for (int i = 0; i < NT; ++i) s[i] = 1.0f / y[i];
  }
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    if (FULL || i < count) {
      c[i] = s[i] + b[i];
    } else {
      s[i] = 0.0f, c[i] = -INFINITY;
    }
  }
}

// The lane's values v[0..NT) (slot i at first + i) into a per-warp shared buffer indexed by expert.
template <int NT, bool FULL>
__host__ __device__ __forceinline__ void store_row(float* buf, int first, int count, const float (&v)[NT]) {
  if constexpr (FULL) {
#pragma unroll
    for (int i = 0; i < NT; i += 4) store4(buf + first + i, v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else {
#pragma unroll
    for (int i = 0; i < NT; ++i)
      if (i < count) buf[first + i] = v[i];
  }
}

// Step 3: the group's top two over its m lanes from each lane's best two values (the largest twice when it
// occurs twice; v1's fmin/fmax merge), its score, and its rank: lane q of group g compares g with groups
// h = q, q + m, q + 2m, ... (those below gslots), one shuffle each, and the ballot of comparison r holds,
// in g's m lanes, whether each of its m groups is better than g.
template <int GSC, class Warp>
__host__ __device__ __forceinline__ int group_rank(Warp& warp, float top1, float top2, int lane, int g, int q, int m,
                                                   int ls, int groups, int gslots) {
#pragma unroll
  for (int d = 1; d < m; d <<= 1) {
    const float o1 = warp.shfl_xor(top1, d), o2 = warp.shfl_xor(top2, d);
    top2 = fmaxf(fminf(top1, o1), fmaxf(top2, o2));
    top1 = fmaxf(top1, o1);
  }
  const float group_score = g < groups ? top1 + top2 : -INFINITY;
  const int rounds = gslots > m ? gslots >> ls : 1;
  const unsigned own = (2u << (m - 1)) - 1u;  // m low bits (all 32 when m is 32)
  int rank = 0;
#pragma unroll
  for (int r = 0; r < rounds; ++r) {
    const int h = q + (r << ls);
    const bool valid = h < gslots;
    const float other = warp.shfl(group_score, (valid ? h : 0) << ls);
    const unsigned bits = warp.ballot(valid && better(other, h, group_score, g));
    rank += popc((bits >> (lane - q)) & own);
  }
  return rank;
}

// Step 5: after a __syncwarp, lane j < k reads round j's id and that expert's s from shared memory, every
// lane sums the k scores in round order through k shuffles (v2's order and operations: v2's sum starts
// from 0.0f, and 0 + s_0 is s_0 itself since s is never -0), and lane j stores weight j and id j.
template <int KC, class Warp>
__host__ __device__ __forceinline__ void finish(const Problem& p, long long t, int lane, int k, Warp& warp,
                                                const float* s_buf, const int* rec) {
  warp.sync();
  float out_s = 0.0f;
  int out_id = 0;
  if (lane < k) out_id = rec[lane], out_s = s_buf[out_id];
  float sum = warp.shfl(out_s, 0);
  if constexpr (KC != 0) {
#pragma unroll
    for (int j = 1; j < KC; ++j) sum += warp.shfl(out_s, j);
  } else {
    for (int j = 1; j < k; ++j) sum += warp.shfl(out_s, j);
  }
  if (lane < k) {
    const float w = p.renormalize ? out_s / sum * p.scale : out_s * p.scale;
    p.weights[t * p.w_row + lane * p.w_col] = w;
    p.ids[t * p.i_row + lane * p.i_col] = out_id;
  }
}

// The round's winner: the warp's largest offered key, offered by this lane and by no lower lane (lowest lane
// = lowest index among equal values). Written as a test of the ballot that every lane evaluates (ptxas turns
// "offers && no lower lane offers" into a branch of the offering lanes around the ballot, a divergent
// region in every round).
template <class Warp>
__host__ __device__ __forceinline__ bool round_winner(Warp& warp, int key, unsigned below, unsigned mine) {
  const int best = warp.reduce_max(key);
  const unsigned offering = warp.ballot(key == best);
  return (offering & (below | mine)) == mine;
}

// Routes token row t, whose logits x and the bias b the lane has loaded (LaneMap::load_both), with the
// calling warp. Warp supplies the collectives over all 32 lanes: shfl(v, src), shfl_xor(v, d), ballot(pred),
// reduce_max(int), sync() (a __syncwarp), lt_mask() (the lanes below the caller, %lanemask_lt, so
// lt_mask() + 1 is the caller's own bit), and store_if(p, v, pred) (*p = v where pred, p in shared
// memory). The warp's own shared memory: s_buf, 32 NT floats (the row's s at [e]), and rec, k ints (round
// j's winner at [j]). A warp that routes another row with the same buffers calls warp.sync() in between.
template <int NT, bool FULL, int GSC, int KC, class Warp>
__host__ __device__ __forceinline__ void route_loaded(const Problem& p, const LaneMap<NT, FULL, GSC, KC>& lm, long long t,
                                                      int lane, Warp& warp, const float (&x)[NT], const float (&b)[NT],
                                                      float* s_buf, int* rec) {
  const int k = lm.k, first = lm.first, count = lm.count;

  // 1. Scores; s for the weights at the end. (c stays in registers for a rescan: written to shared memory
  // as well, it let ptxas issue the bias loads only after the sigmoids, a second memory latency on the
  // row's path.)
  float s[NT], c[NT];
  scores<NT, FULL>(x, b, count, s, c);
  store_row<NT, FULL>(s_buf, first, count, s);

  // 2. The lane's best three.
  const Top3 best = lane_top3<NT>(c);
  int key1 = order_key(best.v1), key2 = order_key(best.v2), key3 = order_key(best.v3);
  int id1 = first + best.i1, id2 = first + best.i2, id3 = first + best.i3;

  // 3. The group's rank; a dropped group offers nothing.
  if (p.keep < lm.groups) {
    const int rank = group_rank<GSC>(warp, best.v1, best.v2, lane, lm.g, lm.q, lm.m, lm.ls, lm.groups, lm.gslots);
    if (rank >= p.keep) key1 = kNoKey, key2 = kNoKey, key3 = kNoKey;
  }

  // 4. k rounds of a warp argmax on (c descending, lane ascending).
  const unsigned below = warp.lt_mask(), mine = below + 1u;  // the lanes below this one; this lane's bit
  const auto round = [&](int j) {
    const bool win = round_winner(warp, key1, below, mine);
    warp.store_if(rec + j, id1, win);
    if (j + 1 < k) {
      // The winner shifts its cache up by one; kNoKey marks a used-up entry, and a lane that wins with
      // nothing cached behind its offer (its third win, or later) rescans. In rounds 0 and 1 no kept lane
      // has won twice yet, so its key2 is still cached (a dropped lane's keys are all kNoKey, but it never
      // wins): no rescan there.
      const int last_key = key1, last_id = id1;
      const bool refill = j >= 2 && win && key2 == kNoKey;
      key1 = win ? key2 : key1, id1 = win ? id2 : id1;
      key2 = win ? key3 : key2, id2 = win ? id3 : id2;
      key3 = win ? kNoKey : key3;
      if (refill) {
        // The best (c, slot) below the one just given: lower c, or equal c and a later slot.
        const float last = key_value(last_key);
        const int last_i = last_id - first;
        float cv = -INFINITY;
        int ci = NT;
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          const float ce = (FULL || i < count) ? c[i] : -INFINITY;
          // Bitwise, not short-circuit: predicates and selects rather than a branch per slot.
          const bool lower = (ce < last) | ((ce == last) & (i > last_i));
          if (lower & (ce > cv)) cv = ce, ci = i;
        }
        key1 = order_key(cv), id1 = first + ci;
      }
    }
  };
  if constexpr (KC != 0) {
#pragma unroll
    for (int j = 0; j < KC; ++j) round(j);
  } else {
    for (int j = 0; j < k; ++j) round(j);
  }

  // 5. The weights and ids.
  finish<KC>(p, t, lane, k, warp, s_buf, rec);
}

// Compare-exchange of (key, slot) pairs into (better, worse) order; `ordered`: a's slot is known to be below
// b's, so equal keys keep the order and one comparison decides.
template <bool ordered>
__host__ __device__ __forceinline__ void exchange(int& ka, int& sa, int& kb, int& sb) {
  const bool swap = ordered ? kb > ka : (kb > ka || (kb == ka && sb < sa));
  const int k0 = swap ? kb : ka, s0 = swap ? sb : sa, k1 = swap ? ka : kb, s1 = swap ? sa : sb;
  ka = k0, sa = s0, kb = k1, sb = s1;
}

// The spread variant of steps 2-4, for shapes whose kept groups hold exactly 4 experts a lane (DeepSeek-V3:
// 4 groups of 32 kept, 128 experts for 32 lanes; FULL, the groups and k at compile time, keep KEEPC):
//   2. each lane's best two values only (a tree of fmin/fmax), for the group scores; c goes to shared memory;
//   3. the groups' ranks as route_loaded's; then the kept groups' experts are spread over the whole warp in
//      index order: lane L takes 4 consecutive experts of the (L / (32 / KEEPC))-th kept group, found from
//      ballots of the kept groups' indices (no lane of a dropped group idles through the rounds), and reads
//      their c back from shared memory after a __syncwarp;
//   4. the 4 sorted by (c descending, slot ascending) with five compare-exchanges, and the rounds step
//      through all four by selects: a lane never needs a rescan, so the rounds have no branch.
// buf: 64 NT floats (s at [e], c at [32 NT + e]).
template <int NT, int GSC, int KC, int KEEPC, class Warp>
__host__ __device__ __forceinline__ void route_loaded_spread(const Problem& p, const LaneMap<NT, true, GSC, KC>& lm,
                                                             long long t, int lane, Warp& warp, const float (&x)[NT],
                                                             const float (&b)[NT], float* buf, int* rec) {
  static_assert(GSC != 0 && KC != 0, "the spread variant has the groups and k at compile time");
  constexpr int kM = 32 / GSC, kPerGroup = kM * NT;
  static_assert(KEEPC >= 1 && KEEPC < GSC && KEEPC * kPerGroup == 4 * 32, "the kept experts: 4 a lane");
  static_assert((KEEPC & (KEEPC - 1)) == 0, "kept groups: a power of two");
  constexpr int kLanesPerKept = 32 / KEEPC;  // lanes that share one kept group after the spread
  constexpr int kIdxBits = KEEPC == 1 ? 0 : KEEPC == 2 ? 1 : KEEPC == 4 ? 2 : KEEPC == 8 ? 3 : 4;
  const int g = lm.g, q = lm.q, first = lm.first;
  float* const s_buf = buf;
  float* const c_buf = buf + 32 * NT;

  // 1. Scores; s and c to shared memory.
  float s[NT], c[NT];
  scores<NT, true>(x, b, NT, s, c);
  store_row<NT, true>(s_buf, first, NT, s);
  store_row<NT, true>(c_buf, first, NT, c);

  // 2. The lane's best two values (with multiplicity): pairs, then merges.
  float top1 = fmaxf(c[0], c[1]), top2 = fminf(c[0], c[1]);
#pragma unroll
  for (int i = 2; i < NT; i += 2) {
    const float h = fmaxf(c[i], c[i + 1]), l = fminf(c[i], c[i + 1]);
    top2 = fmaxf(fminf(top1, h), fmaxf(top2, l));
    top1 = fmaxf(top1, h);
  }

  // 3. The group's rank, and the spread: which kept group (in index order) is this lane's source.
  const int rank = group_rank<GSC>(warp, top1, top2, lane, g, q, kM, LaneMap<NT, true, GSC, KC>::kLs, GSC, GSC);
  const bool head = rank < KEEPC && q == 0;  // the first lane of a kept group
  const unsigned kept = warp.ballot(head);   // bit g m for each kept group g
  const int index = popc(kept & ((1u << (lane - q)) - 1u));  // kept groups below this lane's
  const int want = lane / kLanesPerKept;                     // the kept group (by index) this lane takes
  unsigned pick = kept;
#pragma unroll
  for (int bit = 0; bit < kIdxBits; ++bit) {
    const unsigned has = warp.ballot(head && ((index >> bit) & 1));
    pick &= ((want >> bit) & 1) ? has : ~has;
  }
  // pick: the one bit (source group) m; its first expert is (bit / m) kPerGroup.
  const int source = (31 - clz(pick)) / kM;
  const int first4 = source * kPerGroup + (lane % kLanesPerKept) * 4;
  warp.sync();  // every lane's c is in c_buf
  const Four v = load4_shared(c_buf + first4);

  // 4. The four sorted, and the rounds.
  int k0 = order_key(v.x), k1 = order_key(v.y), k2 = order_key(v.z), k3 = order_key(v.w);
  int s0 = 0, s1 = 1, s2 = 2, s3 = 3;
  exchange<true>(k0, s0, k1, s1);
  exchange<true>(k2, s2, k3, s3);
  exchange<true>(k0, s0, k2, s2);
  exchange<true>(k1, s1, k3, s3);
  exchange<false>(k1, s1, k2, s2);
  int id0 = first4 + s0, id1 = first4 + s1, id2 = first4 + s2, id3 = first4 + s3;
  const unsigned below = warp.lt_mask(), mine = below + 1u;
#pragma unroll
  for (int j = 0; j < KC; ++j) {
    const bool win = round_winner(warp, k0, below, mine);
    warp.store_if(rec + j, id0, win);
    if (j + 1 < KC) {
      k0 = win ? k1 : k0, id0 = win ? id1 : id0;
      k1 = win ? k2 : k1, id1 = win ? id2 : id1;
      k2 = win ? k3 : k2, id2 = win ? id3 : id2;
      k3 = win ? kNoKey : k3;
    }
  }

  // 5. The weights and ids.
  finish<KC>(p, t, lane, KC, warp, s_buf, rec);
}

// One row: the loads (each 16-byte load of the bias next to one of the logits, as v2) and route_loaded, or
// route_loaded_spread when KEEPC is not 0 (buf then holds 64 NT floats, else 32 NT).
template <int NT, bool FULL, int GSC, int KC, int KEEPC, class Warp>
__host__ __device__ __forceinline__ void route_row(const Problem& p, long long t, int lane, Warp& warp, float* buf,
                                                   int* rec) {
  const LaneMap<NT, FULL, GSC, KC> lm(p, lane);
  float x[NT], b[NT];
  if constexpr (KEEPC != 0) {
#ifdef __CUDA_ARCH__
    // Without this prefetch of the lane's bias, ptxas (CUDA 13.0) schedules the spread variant's bias loads
    // after the sigmoids: a second memory latency on the row's path. With it, all four loads issue at the
    // start (checked in the SASS; the prefetch itself is one CCTL instruction).
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p.bias + lm.first));
#endif
  }
  lm.load_both(p, t, b, x);
  if constexpr (KEEPC != 0) {
    static_assert(FULL, "the spread variant needs full lanes");
    route_loaded_spread<NT, GSC, KC, KEEPC>(p, lm, t, lane, warp, x, b, buf, rec);
  } else {
    route_loaded(p, lm, t, lane, warp, x, b, buf, rec);
  }
}

}  // namespace gtopk
