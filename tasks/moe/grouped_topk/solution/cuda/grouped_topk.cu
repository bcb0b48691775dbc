// moe/grouped_topk: expert CUDA solution for the H200 (sm_90a).
//
// One kernel, one pass over the logits. A token lives in L lanes of a warp (L = the groups rounded up to
// a power of two, times the lanes one group needs at 32 experts a lane): for DeepSeek-V3 (256 experts, 8
// groups of 32) a group per lane and four tokens per warp. Each lane loads its group's 32 logits with
// 16-byte loads and keeps, in registers, each expert's biased score c = sigmoid(x) + bias and its score s.
//   1. Group score: the lane's top two c, merged across the group's lanes by shuffles when a group spans
//      several (the largest twice when it occurs twice).
//   2. Kept groups: every lane ranks its group against all the token's groups (a shuffle per group slot;
//      greater score, or equal and lower index, counts); the groups of rank < topk_group are kept.
//   3. k rounds of a shuffle argmax over the token's lanes on (c descending, expert index ascending); each
//      lane offers its best expert not yet taken (lanes of dropped groups offer nothing), the winner's lane
//      marks it taken and rescans its registers. Scanning in index order with a strict comparison keeps
//      the lowest index among equal values, so the tie rule holds inside a lane and across lanes.
//   4. The winners' ids and unbiased scores go to shared memory in round order; the sum of the scores is
//      accumulated in round order by every lane alike; each lane then stores its share of the k outputs.
// Equal inputs give bit-equal c in every lane (the same instructions), so exact ties are seen as ties.
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kPerLane = 32;  // experts a lane holds
constexpr int kMaxK = 32;

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
  int per_group;       // experts per group
  int lanes_per_group;  // m: a power of two
  int lanes;           // L = group slots (a power of two) * m, at most 32
  int renormalize;
  float scale;
  bool vector_loads;   // 16-byte loads of a lane's 32 logits and biases
};

// (c, index) is better than (oc, oindex): larger c, or equal c and lower index.
__device__ __forceinline__ bool better(float c, int index, float oc, int oindex) {
  return c > oc || (c == oc && index < oindex);
}

__global__ void __launch_bounds__(kThreads) grouped_topk_kernel(Problem p) {
  __shared__ float won_score[kWarps][kMaxK * 32];
  __shared__ int won_id[kWarps][kMaxK * 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int L = p.lanes, m = p.lanes_per_group;
  const int r = lane & (L - 1);          // lane within the token's segment
  const int slot = lane / L;             // the token's segment within the warp
  const int tokens_per_warp = 32 / L;
  const long long t = (static_cast<long long>(blockIdx.x) * kWarps + warp) * tokens_per_warp + slot;
  const bool live = t < p.T;             // lanes of a missing token still take part in the shuffles
  const int g = r / m, q = r % m;        // group and slice of the group
  const int first = g * p.per_group + q * kPerLane;  // expert of register 0
  // Experts this lane holds: a group's last lane may hold fewer than 32, or none (m is rounded up).
  int count = min(max(p.per_group - q * kPerLane, 0), kPerLane);
  if (g >= p.groups || !live) count = 0;

  float c[kPerLane], s[kPerLane];
  const float* row = p.logits + (live ? t : 0) * p.l_row;
  if (p.vector_loads && count == kPerLane) {
    const float4* v = reinterpret_cast<const float4*>(row + first);
#pragma unroll
    for (int i = 0; i < kPerLane / 4; ++i) {
      const float4 x = __ldg(v + i);
      c[4 * i] = x.x, c[4 * i + 1] = x.y, c[4 * i + 2] = x.z, c[4 * i + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) c[i] = i < count ? __ldg(row + (first + i) * p.l_col) : 0.0f;
  }
  float b[kPerLane];
  if (p.vector_loads && count == kPerLane) {
    const float4* v = reinterpret_cast<const float4*>(p.bias + first);
#pragma unroll
    for (int i = 0; i < kPerLane / 4; ++i) {
      const float4 x = __ldg(v + i);
      b[4 * i] = x.x, b[4 * i + 1] = x.y, b[4 * i + 2] = x.z, b[4 * i + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) b[i] = i < count ? __ldg(p.bias + (first + i) * p.b_stride) : 0.0f;
  }
  float top1 = -INFINITY, top2 = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (i < count) {
      s[i] = 1.0f / (1.0f + __expf(-c[i]));
      c[i] = s[i] + b[i];
      if (c[i] > top1) top2 = top1, top1 = c[i];
      else if (c[i] > top2) top2 = c[i];
    } else {
      s[i] = 0.0f, c[i] = -INFINITY;
    }
  }
  // The group's top two over its m lanes.
  for (int d = 1; d < m; d <<= 1) {
    const float o1 = __shfl_xor_sync(kFullMask, top1, d, L), o2 = __shfl_xor_sync(kFullMask, top2, d, L);
    top2 = fmaxf(fminf(top1, o1), fmaxf(top2, o2));
    top1 = fmaxf(top1, o1);
  }
  const float group_score = g < p.groups ? top1 + top2 : -INFINITY;
  int rank = 0;
  for (int h = 0; h < L / m; ++h) {
    const float other = __shfl_sync(kFullMask, group_score, h * m, L);
    rank += better(other, h, group_score, g) ? 1 : 0;
  }
  if (rank >= p.keep) count = 0;  // a dropped group offers no expert

  // The lane's best untaken expert; lanes of dropped groups hold -inf.
  unsigned taken = 0;
  float best_c = -INFINITY, best_s = 0.0f;
  int best_i = 0x7fffffff;
  const auto rescan = [&]() {
    best_c = -INFINITY, best_s = 0.0f, best_i = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (i < count && !((taken >> i) & 1u) && c[i] > best_c) best_c = c[i], best_s = s[i], best_i = first + i;
    }
  };
  rescan();
  float* my_scores = won_score[warp] + slot * kMaxK;
  int* my_ids = won_id[warp] + slot * kMaxK;
  float sum = 0.0f;
  for (int j = 0; j < p.k; ++j) {
    float wc = best_c, ws = best_s;
    int wi = best_i;
    for (int d = L >> 1; d > 0; d >>= 1) {
      const float oc = __shfl_xor_sync(kFullMask, wc, d, L), os = __shfl_xor_sync(kFullMask, ws, d, L);
      const int oi = __shfl_xor_sync(kFullMask, wi, d, L);
      if (better(oc, oi, wc, wi)) wc = oc, ws = os, wi = oi;
    }
    sum += ws;
    if (r == 0) my_scores[j] = ws, my_ids[j] = wi;
    if (wi == best_i && count > 0) {
      taken |= 1u << (wi - first);
      rescan();
    }
  }
  __syncwarp();
  if (!live) return;
  for (int j = r; j < p.k; j += L) {
    const float w = p.renormalize ? my_scores[j] / sum * p.scale : my_scores[j] * p.scale;
    p.weights[t * p.w_row + j * p.w_col] = w;
    p.ids[t * p.i_row + j * p.i_col] = my_ids[j];
  }
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

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  return nullptr;
}

int power_of_two_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor* logits = find(call->inputs, call->num_inputs, "logits");
  const d2k_tensor* bias = find(call->inputs, call->num_inputs, "bias");
  const d2k_tensor* weights = find(call->outputs, call->num_outputs, "weights");
  const d2k_tensor* ids = find(call->outputs, call->num_outputs, "ids");
  const d2k_scalar* groups = find_scalar(call, "num_expert_group");
  const d2k_scalar* keep = find_scalar(call, "topk_group");
  const d2k_scalar* renormalize = find_scalar(call, "renormalize");
  const d2k_scalar* scale = find_scalar(call, "routed_scaling_factor");
  if (!logits || !bias || !weights || !ids || !groups || !keep || !renormalize || !scale)
    return fail(call, "grouped_topk: expected inputs logits, bias, outputs weights, ids and the four scalars");
  if (logits->dtype != D2K_FLOAT32 || bias->dtype != D2K_FLOAT32 || weights->dtype != D2K_FLOAT32 || ids->dtype != D2K_INT32)
    return fail(call, "grouped_topk: expected logits, bias, weights f32 and ids i32");
  Problem p{};
  p.T = logits->shape[0], p.E = static_cast<int>(logits->shape[1]), p.k = static_cast<int>(weights->shape[1]);
  p.groups = static_cast<int>(groups->i), p.keep = static_cast<int>(keep->i);
  if (p.groups < 1 || p.groups > 32 || p.E % p.groups != 0 || p.E / p.groups < 2 || p.keep < 1 || p.keep > p.groups ||
      p.k < 1 || p.k > kMaxK || p.k > p.keep * (p.E / p.groups))
    return fail(call, "grouped_topk: unsupported E=%d, groups=%d, topk_group=%d, k=%d", p.E, p.groups, p.keep, p.k);
  p.per_group = p.E / p.groups;
  p.lanes_per_group = power_of_two_at_least((p.per_group + kPerLane - 1) / kPerLane);
  p.lanes = power_of_two_at_least(p.groups) * p.lanes_per_group;
  if (p.lanes > 32)
    return fail(call, "grouped_topk: %d groups of %d experts need %d lanes a token; this kernel takes at most 32",
                p.groups, p.per_group, p.lanes);
  p.logits = static_cast<const float*>(logits->data), p.l_row = logits->strides[0], p.l_col = logits->strides[1];
  p.bias = static_cast<const float*>(bias->data), p.b_stride = bias->strides[0];
  p.weights = static_cast<float*>(weights->data), p.w_row = weights->strides[0], p.w_col = weights->strides[1];
  p.ids = static_cast<int32_t*>(ids->data), p.i_row = ids->strides[0], p.i_col = ids->strides[1];
  p.renormalize = static_cast<int>(renormalize->i != 0);
  p.scale = static_cast<float>(scale->f);
  p.vector_loads = p.l_col == 1 && p.l_row % 4 == 0 && p.b_stride == 1 && p.per_group % 4 == 0 &&
                   reinterpret_cast<uintptr_t>(p.logits) % 16 == 0 && reinterpret_cast<uintptr_t>(p.bias) % 16 == 0;
  if (p.T == 0) return 0;
  const long long tokens_per_block = static_cast<long long>(kWarps) * (32 / p.lanes);
  const long long blocks = (p.T + tokens_per_block - 1) / tokens_per_block;
  grouped_topk_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(p);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return fail(call, "grouped_topk: launch failed: %s", cudaGetErrorString(error));
  return 0;
}
