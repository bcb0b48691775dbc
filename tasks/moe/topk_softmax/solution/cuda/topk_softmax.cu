// moe/topk_softmax: expert CUDA solution for the H200 (sm_90a).
//
// One pass over the logits. A row lives in the registers of a small group of lanes (LANES lanes, VPT
// values each, loaded with 16-byte loads when the layout allows). Each lane sorts its best few
// experts into a short candidate list; the group then takes k winners, one per round, by a shuffle
// argmax over the lanes' list heads (logit descending, index ascending), and only the winner's lane
// pops its list. Ranking by the logits, not by rounded fp32 probabilities, gives exactly the order of
// the exact probabilities, ties included. With renormalization the softmax denominator cancels:
// weight_j = exp(l_j - max) / sum over the chosen of exp(l_i - max), so the exponentials are taken
// only for the k winners. Rows of more than 1024 experts, or a k too large for the per-lane result
// slots, take a general warp-per-row kernel.
#include <cuda_runtime.h>

#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlock = 128;
constexpr int kMaxFastExperts = 1024;
// Winners a lane keeps for the final store (round r goes to lane r % LANES): k <= kMaxSlots * LANES.
constexpr int kMaxSlots = 4;
// Candidates each lane keeps sorted in registers between rounds.
constexpr int kCache = 4;

struct Problem {
  const float* logits;
  long long l_row, l_col;
  float* weights;
  long long w_row, w_col;
  int32_t* ids;
  long long i_row, i_col;
  long long T;
  int E, k, renormalize;
};

__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fffffff); }

// The task's order: a larger logit first, the lower index among equal logits (-0.0 == +0.0 here).
__device__ __forceinline__ bool ranks_before(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// Butterfly over the LANES lanes of a group: every lane ends with the group's best (value, index).
// All 32 lanes of the warp take part (groups never straddle a warp), so the full mask is exact.
template <int LANES>
__device__ __forceinline__ void group_argmax(float& bv, int& bi) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset /= 2) {
    const float ov = __shfl_xor_sync(kFullMask, bv, offset);
    const int oi = __shfl_xor_sync(kFullMask, bi, offset);
    if (ranks_before(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
}

// Butterfly sum; a + b == b + a in floating point, so every lane ends with the same bits.
template <int LANES, typename F>
__device__ __forceinline__ F group_sum(F s) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(kFullMask, s, offset);
  return s;
}

// Lane `lane` of a group holds, in slot s, the expert (s / VEC) * LANES * VEC + lane * VEC + s % VEC:
// consecutive lanes read consecutive VEC-wide pieces, and a lane's slots ascend in expert index.
template <int LANES, int VEC>
__device__ __forceinline__ int expert_of(int slot, int lane) {
  return (slot / VEC) * LANES * VEC + lane * VEC + slot % VEC;
}

// Fills a lane's candidate list (a, ai) with its best kCache slots in the task's order; an empty
// entry holds NaN and index INT_MAX. With kAll every slot competes; otherwise only the slots that
// rank after (after_v, after_i), the lane's last winner. Slots are inserted in ascending expert
// index, so an equal value goes behind the entries already there: the tie rule. `x <= a` is false
// both for a smaller a and for an empty (NaN) a, so one comparison per entry places x.
template <bool kAll, int LANES, int VPT, int VEC>
__device__ __forceinline__ void fill(const float (&v)[VPT], int lane, float after_v, int after_i,
                                     float (&a)[kCache], int (&ai)[kCache]) {
#pragma unroll
  for (int j = 0; j < kCache; ++j) {
    a[j] = quiet_nan();
    ai[j] = INT_MAX;
  }
#pragma unroll
  for (int s = 0; s < VPT; ++s) {
    const float x = v[s];
    const int xi = expert_of<LANES, VEC>(s, lane);
    const bool eligible = kAll || x < after_v || (x == after_v && xi > after_i);
    bool goes_before[kCache];
#pragma unroll
    for (int j = 0; j < kCache; ++j) goes_before[j] = eligible && !(x <= a[j]);
#pragma unroll
    for (int j = kCache - 1; j > 0; --j) {
      a[j] = goes_before[j - 1] ? a[j - 1] : (goes_before[j] ? x : a[j]);
      ai[j] = goes_before[j - 1] ? ai[j - 1] : (goes_before[j] ? xi : ai[j]);
    }
    a[0] = goes_before[0] ? x : a[0];
    ai[0] = goes_before[0] ? xi : ai[0];
  }
}

// At most 64 registers for rows of up to 16 values a lane: 8 blocks an SM, so the largest workloads
// (T 16384 at E 128: 1024 blocks) run in one wave on 132 SMs.
template <int LANES, int VPT, int VEC, int SLOTS>
__global__ void __launch_bounds__(kBlock, VPT <= 16 ? 8 : 4) topk_softmax_rows(Problem p) {
  static_assert(VPT % VEC == 0 && VPT <= 32 && VPT >= kCache && 32 % LANES == 0, "bad row layout");
  constexpr int kChunks = VPT / VEC;
  const long long thread = static_cast<long long>(blockIdx.x) * kBlock + threadIdx.x;
  const long long row = thread / LANES;
  const int lane = threadIdx.x % LANES;
  // Groups past the last row still run the shuffles (full-warp masks) on padding; they store nothing.
  const bool active = row < p.T;

  // Slots past E hold -inf: with an index >= E they rank after every expert, and k <= E, so they are
  // never chosen; exp(-inf) = 0 leaves the full-row sum unchanged.
  float v[VPT];
  const float* src = p.logits + (active ? row : 0) * p.l_row;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int col = expert_of<LANES, VEC>(c * VEC, lane);
    if (active && col < p.E) {
      if constexpr (VEC == 4) {
        const float4 q = __ldg(reinterpret_cast<const float4*>(src + col));
        v[c * 4 + 0] = q.x;
        v[c * 4 + 1] = q.y;
        v[c * 4 + 2] = q.z;
        v[c * 4 + 3] = q.w;
      } else {
        v[c] = __ldg(src + col * p.l_col);
      }
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[c * VEC + j] = -INFINITY;
    }
  }

  float a[kCache];
  int ai[kCache];
  fill<true, LANES, VPT, VEC>(v, lane, 0.f, 0, a, ai);
  // The list is full (VPT >= kCache); the lane has more candidates past it if VPT > kCache.
  bool more = VPT > kCache;

  float row_max = 0.f;
  float my_v[SLOTS];  // the winning logits this lane stores, and their experts
  int my_id[SLOTS];
#pragma unroll
  for (int b = 0; b < SLOTS; ++b) {
    my_v[b] = -INFINITY;
    my_id[b] = 0;
  }
  for (int r = 0; r < p.k; ++r) {
    // An exhausted lane offers (-inf, INT_MAX), which loses to every expert, padding included.
    float bv = a[0] == a[0] ? a[0] : -INFINITY;
    int bi = ai[0];
    group_argmax<LANES>(bv, bi);
    if (r == 0) row_max = bv;
    if constexpr (SLOTS == 1) {
      if (r == lane) {
        my_v[0] = bv;
        my_id[0] = bi;
      }
    } else {
      const bool mine = r % LANES == lane;
      const int slot = r / LANES;
#pragma unroll
      for (int b = 0; b < SLOTS; ++b) {
        const bool here = mine && b == slot;
        my_v[b] = here ? bv : my_v[b];
        my_id[b] = here ? bi : my_id[b];
      }
    }
    if (bi == ai[0]) {  // this lane held the winner: pop it
#pragma unroll
      for (int j = 0; j + 1 < kCache; ++j) {
        a[j] = a[j + 1];
        ai[j] = ai[j + 1];
      }
      a[kCache - 1] = quiet_nan();
      ai[kCache - 1] = INT_MAX;
      // Rare for k near 8 over 8 or more lanes: a lane rescans only after kCache of its experts won.
      if (more && ai[0] == INT_MAX && r + 1 < p.k) {
        fill<false, LANES, VPT, VEC>(v, lane, bv, bi, a, ai);
        more = a[kCache - 1] == a[kCache - 1];
      }
    }
  }

  // Exponentials only for the winners; each lane sums its own, the group adds them up.
  float e[SLOTS];
  float chosen = 0.f;
#pragma unroll
  for (int b = 0; b < SLOTS; ++b) {
    e[b] = b * LANES + lane < p.k ? expf(my_v[b] - row_max) : 0.f;
    chosen += e[b];
  }
  chosen = group_sum<LANES>(chosen);
  float denom = chosen;
  if (!p.renormalize) {
    float s = 0.f;
#pragma unroll
    for (int t = 0; t < VPT; ++t) s += expf(v[t] - row_max);
    denom = group_sum<LANES>(s);
  }

  if (!active) return;
  const float inv = 1.0f / denom;
#pragma unroll
  for (int b = 0; b < SLOTS; ++b) {
    const int r = b * LANES + lane;
    if (r < p.k) {
      p.weights[row * p.w_row + r * p.w_col] = e[b] * inv;
      p.ids[row * p.i_row + r * p.i_col] = my_id[b];
    }
  }
}

// Any E, any k <= E, any strides: a warp per row. Round r takes the best expert that ranks after the
// one round r-1 took, so nothing needs marking; the row is re-read from L1 each round.
__global__ void __launch_bounds__(kBlock) topk_softmax_any(Problem p) {
  const long long row = (static_cast<long long>(blockIdx.x) * kBlock + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.T) return;  // the whole warp leaves together
  const float* src = p.logits + row * p.l_row;
  float* w = p.weights + row * p.w_row;
  int32_t* id = p.ids + row * p.i_row;

  float prev_v = 0.f, row_max = 0.f;
  double row_sum = 0.0, chosen_sum = 0.0;  // long rows and large k: sums in double
  int prev_i = -1;
  for (int r = 0; r < p.k; ++r) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int e = lane; e < p.E; e += 32) {
      const float x = src[e * p.l_col];
      const bool after = r == 0 || x < prev_v || (x == prev_v && e > prev_i);
      if (after && ranks_before(x, e, bv, bi)) {
        bv = x;
        bi = e;
      }
    }
    group_argmax<32>(bv, bi);
    if (r == 0) {
      row_max = bv;
      if (!p.renormalize) {
        double s = 0.0;
        for (int e = lane; e < p.E; e += 32) s += expf(src[e * p.l_col] - row_max);
        row_sum = group_sum<32>(s);
      }
    }
    const float ex = expf(bv - row_max);
    chosen_sum += ex;
    if (lane == 0) {
      w[r * p.w_col] = ex;
      id[r * p.i_col] = bi;
    }
    prev_v = bv;
    prev_i = bi;
  }
  // Lane 0's unnormalized weights become visible to the other lanes of the warp.
  __syncwarp();
  const double inv = p.renormalize ? 1.0 / chosen_sum : 1.0 / row_sum;
  for (int r = lane; r < p.k; r += 32) w[r * p.w_col] = static_cast<float>(w[r * p.w_col] * inv);
}

int fail(const d2k_call* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(call->error, D2K_ERROR_CAPACITY, format, args);
  va_end(args);
  return 1;
}

const d2k_tensor* find(const d2k_tensor* list, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (list[i].name && strcmp(list[i].name, name) == 0) return &list[i];
  return nullptr;
}

long long blocks_for(long long threads) { return (threads + kBlock - 1) / kBlock; }

template <int LANES, int VPT, int SLOTS>
void launch_rows(const Problem& p, bool vec4, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(blocks_for(p.T * LANES));
  if (vec4)
    topk_softmax_rows<LANES, VPT, 4, SLOTS><<<blocks, kBlock, 0, stream>>>(p);
  else
    topk_softmax_rows<LANES, VPT, 1, SLOTS><<<blocks, kBlock, 0, stream>>>(p);
}

// One result slot a lane when k <= LANES (the common case: k 8 over 8 or more lanes, k 2 over 2).
template <int LANES, int VPT>
bool launch_layout(const Problem& p, bool vec4, cudaStream_t stream) {
  if (p.k <= LANES)
    launch_rows<LANES, VPT, 1>(p, vec4, stream);
  else if (p.k <= kMaxSlots * LANES)
    launch_rows<LANES, VPT, kMaxSlots>(p, vec4, stream);
  else
    return false;
  return true;
}

// The smallest row layout that holds E experts: few lanes a row for small E (several rows a warp),
// up to a full warp of 32 values each.
bool launch_fast(const Problem& p, bool vec4, cudaStream_t stream) {
  if (p.E <= 4) return launch_layout<1, 4>(p, vec4, stream);
  if (p.E <= 8) return launch_layout<2, 4>(p, vec4, stream);
  if (p.E <= 16) return launch_layout<4, 4>(p, vec4, stream);
  if (p.E <= 32) return launch_layout<4, 8>(p, vec4, stream);
  if (p.E <= 64) return launch_layout<8, 8>(p, vec4, stream);
  if (p.E <= 128) return launch_layout<8, 16>(p, vec4, stream);
  if (p.E <= 256) return launch_layout<16, 16>(p, vec4, stream);
  if (p.E <= 512) return launch_layout<32, 16>(p, vec4, stream);
  if (p.E <= kMaxFastExperts) return launch_layout<32, 32>(p, vec4, stream);
  return false;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* logits = find(call->inputs, call->num_inputs, "logits");
  const d2k_tensor* weights = find(call->outputs, call->num_outputs, "weights");
  const d2k_tensor* ids = find(call->outputs, call->num_outputs, "ids");
  if (!logits || !weights || !ids)
    return fail(call, "topk_softmax: expected input 'logits' and outputs 'weights' and 'ids'");
  if (logits->dtype != D2K_FLOAT32 || weights->dtype != D2K_FLOAT32 || ids->dtype != D2K_INT32)
    return fail(call, "topk_softmax: expected logits f32, weights f32, ids i32 (got dtypes %d, %d, %d)",
                logits->dtype, weights->dtype, ids->dtype);
  if (logits->rank != 2 || weights->rank != 2 || ids->rank != 2)
    return fail(call, "topk_softmax: expected rank-2 tensors (got %d, %d, %d)", logits->rank,
                weights->rank, ids->rank);
  const long long T = logits->shape[0], E = logits->shape[1], k = weights->shape[1];
  if (weights->shape[0] != T || ids->shape[0] != T || ids->shape[1] != k)
    return fail(call, "topk_softmax: weights [%lld,%lld] and ids [%lld,%lld] must both be [T=%lld,k]",
                (long long)weights->shape[0], k, (long long)ids->shape[0], (long long)ids->shape[1], T);
  if (E > INT_MAX) return fail(call, "topk_softmax: E=%lld experts do not fit the int32 ids", E);
  if (E < 1 || k < 1 || k > E) return fail(call, "topk_softmax: need 1 <= k <= E (E=%lld, k=%lld)", E, k);
  if (T == 0) return 0;

  Problem p;
  p.logits = static_cast<const float*>(logits->data);
  p.l_row = logits->strides[0];
  p.l_col = logits->strides[1];
  p.weights = static_cast<float*>(weights->data);
  p.w_row = weights->strides[0];
  p.w_col = weights->strides[1];
  p.ids = static_cast<int32_t*>(ids->data);
  p.i_row = ids->strides[0];
  p.i_col = ids->strides[1];
  p.T = T;
  p.E = static_cast<int>(E);
  p.k = static_cast<int>(k);
  p.renormalize = 1;
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && strcmp(call->scalars[i].name, "renormalize") == 0)
      p.renormalize = call->scalars[i].i != 0;

  // The largest launch has T * 32 threads; past that grid size, reject rather than wrap.
  if (blocks_for(T * 32) > INT_MAX)
    return fail(call, "topk_softmax: T=%lld rows exceed one launch's grid", T);

  // 16-byte loads need every row to start on a 16-byte boundary and whole float4s inside the row.
  const bool vec4 = p.l_col == 1 && E % 4 == 0 && reinterpret_cast<uintptr_t>(p.logits) % 16 == 0 &&
                    (T == 1 || p.l_row % 4 == 0);
  auto stream = static_cast<cudaStream_t>(call->stream);
  if (!launch_fast(p, vec4, stream))
    topk_softmax_any<<<static_cast<unsigned>(blocks_for(T * 32)), kBlock, 0, stream>>>(p);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    return fail(call, "topk_softmax: kernel launch failed: %s", cudaGetErrorString(status));
  return 0;
}
