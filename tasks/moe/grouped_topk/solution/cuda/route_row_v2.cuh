// Version 2's per-row algorithm (c53f944's route_row.cuh in namespace gtopk_v2, sharing version 3's Problem
// and the helpers that did not change): the kernel d2k_run launches for many rows of DeepSeek-V3's shape
// (grouped_topk.cu says why), and the earlier version the host emulation
// (tests/host_emulation/grouped_topk_route_row.cpp) compares version 3 with, bit for bit.
// moe/grouped_topk, version 2: one token row per warp. The per-row algorithm lives here, written once for
// the device kernel (grouped_topk.cu) and for a host emulation that runs the same source lane by lane with
// the warp's collectives simulated (a test harness supplies its own Warp type).
//
// Mapping: lane l holds N consecutive experts. A group occupies m = 32 / (groups rounded up to a power of
// two) consecutive lanes, N = ceil(E / groups / m) experts a lane; for DeepSeek-V3 (256 experts, 8 groups)
// 4 lanes a group, 8 experts a lane, and the warp's 32 lanes read the row's 1 KB contiguously. A lower
// lane always holds lower expert indices, so "lowest lane" breaks ties the way "lowest index" does.
//
//   1. s = 1 / (1 + __expf(-x)), c = s + bias, in registers (the float operations of v1).
//   2. The lane's best two (c, slot) by a strict scan in slot order (lowest slot among equal values), which
//      are also the lane's contribution to its group's top two; the group's top two merged over its m lanes
//      by log2(m) xor shuffles of the two values (v1's fmin/fmax merge).
//   3. The group's rank by counting better groups (larger score, or equal and lower index) over one
//      shuffle per group slot; groups of rank >= topk_group drop out (their lanes offer minus infinity).
//   4. k rounds: each lane offers its best untaken c; one warp reduction (redux.sync max) over an exact
//      order-preserving integer image of c gives the round's value, a ballot of the lanes offering it and
//      its lowest set bit the winner (lowest lane = lowest index among equal values). The winner's unbiased
//      score and id are read by a shuffle each, summed in round order by every lane alike and kept by lane
//      j for round j; the winner's lane advances to its precomputed second best, or, from its second win
//      on, rescans its N registers for the best (c, slot) below the one it just gave.
//   5. Lane j < k stores weight j (s_j / sum * scale, as v1) and id j: one coalesced store each.
#pragma once

#include "route_row.cuh"  // the Problem and the helpers both versions use, unchanged (version 3's file)

namespace gtopk_v2 {

using gtopk::better;
using gtopk::float_bits;
using gtopk::Four;
using gtopk::load;
using gtopk::load4;
using gtopk::order_key;
using gtopk::Problem;

__host__ __device__ __forceinline__ float fast_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  // The host emulation's stand-in for the hardware exponential (ex2.approx of x log2 e): not bit-equal to
  // it, but equal inputs give equal outputs, which is all the ranking of ties needs.
  return std::exp2f(x * 1.4426950408889634f);
#endif
}

// Routes token row t with the calling warp. Warp supplies the collectives over all 32 lanes:
// shfl(v, src), shfl_xor(v, d), ballot(pred), reduce_max(int), lowest(mask) (index of the lowest set bit).
// FULL: every lane holds exactly NT experts (E = 32 NT, groups a power of two), so no slot is padding.
template <int NT, bool FULL, class Warp>
__host__ __device__ __forceinline__ void route_row(const Problem& p, long long t, int lane, Warp& warp) {
  static_assert(!FULL || NT % 4 == 0, "a full lane loads its experts 4 at a time");
  const int m = 1 << p.lane_shift;
  const int g = lane >> p.lane_shift, q = lane & (m - 1);
  const int first = g * p.per_group + q * p.per_lane;  // expert of slot 0
  int count = NT;
  if (!FULL) {
    count = p.per_group - q * p.per_lane;
    count = count < 0 ? 0 : (count > p.per_lane ? p.per_lane : count);
    if (g >= p.groups) count = 0;
  }

  float x[NT], b[NT];
  const float* row = p.logits + t * p.l_row;
  const auto scalar_loads = [&]() {
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      x[i] = i < count ? load(row + (first + i) * p.l_col) : 0.0f;
      b[i] = i < count ? load(p.bias + (first + i) * p.b_stride) : 0.0f;
    }
  };
  if constexpr (NT % 4 == 0) {
    if (FULL || (p.vector_loads && count == NT)) {
#pragma unroll
      for (int i = 0; i < NT / 4; ++i) {
        const Four v = load4(row + first + 4 * i), w = load4(p.bias + first + 4 * i);
        x[4 * i] = v.x, x[4 * i + 1] = v.y, x[4 * i + 2] = v.z, x[4 * i + 3] = v.w;
        b[4 * i] = w.x, b[4 * i + 1] = w.y, b[4 * i + 2] = w.z, b[4 * i + 3] = w.w;
      }
    } else {
      scalar_loads();
    }
  } else {
    scalar_loads();
  }

  // Scores, and the lane's best two (cur, nxt) by a strict scan in slot order.
  float c[NT], s[NT];
  float cv = -INFINITY, cs = 0.0f, nv = -INFINITY, ns = 0.0f;
  int ci = NT, ni = NT;
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    if (FULL || i < count) {
      s[i] = 1.0f / (1.0f + fast_exp(-x[i]));
      c[i] = s[i] + b[i];
    } else {
      s[i] = 0.0f, c[i] = -INFINITY;
    }
    if (c[i] > cv) {
      nv = cv, ns = cs, ni = ci;
      cv = c[i], cs = s[i], ci = i;
    } else if (c[i] > nv) {
      nv = c[i], ns = s[i], ni = i;
    }
  }

  if (p.keep < p.groups) {
    // The group's top two over its m lanes (the largest twice when it occurs twice), then its rank.
    float top1 = cv, top2 = nv;
    for (int d = 1; d < m; d <<= 1) {
      const float o1 = warp.shfl_xor(top1, d), o2 = warp.shfl_xor(top2, d);
      top2 = fmaxf(fminf(top1, o1), fmaxf(top2, o2));
      top1 = fmaxf(top1, o1);
    }
    const float group_score = g < p.groups ? top1 + top2 : -INFINITY;
    int rank = 0;
    for (int h = 0; h < p.group_slots; ++h) {
      const float other = warp.shfl(group_score, h << p.lane_shift);
      rank += better(other, h, group_score, g) ? 1 : 0;
    }
    if (rank >= p.keep) cv = -INFINITY, nv = -INFINITY, count = 0;  // a dropped group offers nothing
  }

  // k rounds of a warp argmax on (c descending, lane ascending).
  bool have_next = true;
  float sum = 0.0f, out_s = 0.0f;
  int out_id = 0;
  for (int j = 0; j < p.k; ++j) {
    const int key = order_key(cv);
    const int best = warp.reduce_max(key);
    const int winner = warp.lowest(warp.ballot(key == best));
    const float ws = warp.shfl(cs, winner);
    const int wid = warp.shfl(first + ci, winner);
    sum += ws;
    if (lane == j) out_s = ws, out_id = wid;
    if (lane == winner && j + 1 < p.k) {
      if (have_next) {
        cv = nv, cs = ns, ci = ni, have_next = false;
      } else {
        // The best (c, slot) below the one just given: lower c, or equal c and a later slot.
        const float last = cv;
        const int last_i = ci;
        cv = -INFINITY, cs = 0.0f, ci = NT;
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          // Bitwise, not short-circuit: predicates and selects rather than a branch per slot.
          const bool below = (c[i] < last) | ((c[i] == last) & (i > last_i));
          if ((FULL || i < count) & below & (c[i] > cv)) cv = c[i], cs = s[i], ci = i;
        }
      }
    }
  }

  if (lane < p.k) {
    const float w = p.renormalize ? out_s / sum * p.scale : out_s * p.scale;
    p.weights[t * p.w_row + lane * p.w_col] = w;
    p.ids[t * p.i_row + lane * p.i_col] = out_id;
  }
}

}  // namespace gtopk_v2
