// sample/top_k_top_p: expert CUDA solution for the H200 (sm_90a).
//
// One CTA of 512 threads per row, no sort. The k-th largest probability and the top-p boundary are
// found by a radix select on the float bits (positive floats order as their bit patterns): a histogram
// of the top 11 bits with each bin's count and mass, then, inside the bin that holds the answer, of the
// next 11 bits, then of the last 9, so that the thresholds are exact values and tie groups stay whole.
// After the first histogram the tokens that can survive (every bin from the k-th's bin, or from the
// top-p bin when there is no top-k, upwards) are usually a few hundred: they are compacted, in index
// order, into shared memory and everything else runs there; the row is read from DRAM twice. When they
// do not fit, the same steps run over the row in global memory.
//
// Masses are fixed point (probability x 2^40, truncated): integer sums are exact in any order, so the
// atomics of the histograms and the block scans give the same bits on every run (the task is
// deterministic); a histogram bin keeps a mass as two 32-bit sums (the bits above and below bit 12),
// because shared-memory atomics add 32 bits natively and emulate 64 with a compare-and-swap loop, and a p boundary 1e-4 away from any cumulative mass is decided exactly. The draw is an
// inverse CDF in index order over the kept tokens with one uniform number from Philox-4x32-10 keyed on
// (seed, row).
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr int kThreads = 512;
constexpr int kPer = 8;                  // consecutive elements per thread per step of a pass (two 16-byte loads)
constexpr int kTile = kPer * kThreads;   // elements per step
constexpr int kCapacity = 2000;          // tokens the shared-memory list holds
constexpr int kMaxBins = 2048;
constexpr int kBinsPer = kMaxBins / kThreads;  // bins per thread when choosing one
// The three digits of a positive float's bits (bit 31 is 0): 30..20, 19..9, 8..0.
__host__ __device__ constexpr int shift_of(int level) { return level == 0 ? 20 : level == 1 ? 9 : 0; }
__host__ __device__ constexpr int bins_of(int level) { return level == 2 ? 512 : 2048; }
constexpr float kFixed = 1099511627776.0f;  // 2^40

using u64 = unsigned long long;
using Scan = cub::BlockScan<u64, kThreads>;

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

struct Shared {
  unsigned count[kMaxBins];
  unsigned mass_hi[kMaxBins], mass_lo[kMaxBins];  // a bin's mass = hi * 2^12 + lo
  alignas(16) float value[kCapacity];
  int index[kCapacity];
  typename Scan::TempStorage scan;
  int chosen;
  int found;
  u64 excl_count, excl_mass, bin_count, bin_mass;
};

// What a pass reads, kPer consecutive elements per thread per tile: the row in global memory (16-byte loads
// when aligned), or the compacted candidates in shared memory, in index order (`index` set).
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
  return (static_cast<u64>(s.mass_hi[b]) << 12) + s.mass_lo[b];
}

__device__ __forceinline__ int digit(float x, int level) {
  return static_cast<int>((__float_as_uint(x) >> shift_of(level)) & static_cast<unsigned>(bins_of(level) - 1));
}

__device__ __noinline__ void histogram(Shared& s, const Source& src, int level, unsigned prefix, float floor) {
  for (int b = threadIdx.x; b < bins_of(level); b += kThreads) s.count[b] = 0, s.mass_hi[b] = 0, s.mass_lo[b] = 0;
  __syncthreads();
  for (int base = 0; base < src.n; base += kTile) {
    float v[kPer];
    src.load(base + kPer * threadIdx.x, v);
    for (int j = 0; j < kPer; ++j) {
      if (!in_prefix(v[j], level, prefix, floor)) continue;
      const int d = digit(v[j], level);
      const u64 m = fixed(v[j]);
      atomicAdd(&s.count[d], 1u);
      // A row's mass is at most 2^40: the high sums stay under 2^28, the low ones under 2^12 per element.
      atomicAdd(&s.mass_hi[d], static_cast<unsigned>(m >> 12));
      atomicAdd(&s.mass_lo[d], static_cast<unsigned>(m & 4095u));
    }
  }
  __syncthreads();
}

// Over the bins in descending order (thread t holds places kBinsPer t to kBinsPer t + kBinsPer - 1): by
// count, the first bin whose inclusive count reaches `rank`; by mass, the last non-empty bin whose
// exclusive mass is below `limit`. Leaves the chosen bin and its exclusive count and mass, and its own,
// in shared memory.
__device__ __noinline__ void choose(Shared& s, int level, bool by_count, u64 rank, u64 limit) {
  const int bins = bins_of(level);
  u64 c[kBinsPer], m[kBinsPer], c_sum = 0, m_sum = 0;
  for (int j = 0; j < kBinsPer; ++j) {
    const int place = kBinsPer * threadIdx.x + j, bin = bins - 1 - place;
    c[j] = place < bins ? s.count[bin] : 0;
    m[j] = place < bins ? bin_mass(s, bin) : 0;
    c_sum += c[j], m_sum += m[j];
  }
  if (threadIdx.x == 0) s.chosen = by_count ? kMaxBins : -1;
  u64 cx, mx;
  Scan(s.scan).ExclusiveSum(c_sum, cx);
  __syncthreads();
  Scan(s.scan).ExclusiveSum(m_sum, mx);
  __syncthreads();
  for (int j = 0; j < kBinsPer; ++j) {
    const int place = kBinsPer * threadIdx.x + j;
    if (place < bins && c[j] > 0 && (by_count ? cx + c[j] >= rank && cx < rank : mx < limit))
      by_count ? atomicMin(&s.chosen, place) : atomicMax(&s.chosen, place);
    cx += c[j], mx += m[j];
  }
  __syncthreads();
  cx -= c_sum, mx -= m_sum;
  for (int j = 0; j < kBinsPer; ++j) {
    if (kBinsPer * static_cast<int>(threadIdx.x) + j == s.chosen)
      s.excl_count = cx, s.excl_mass = mx, s.bin_count = c[j], s.bin_mass = m[j];
    cx += c[j], mx += m[j];
  }
  __syncthreads();
  if (threadIdx.x == 0) s.chosen = bins - 1 - s.chosen;  // the place as a bin
  __syncthreads();
}

// The exact value selected by refining from `level` on inside bin `prefix` of the level above, by the
// k-th largest (rank) or by the top-p mass limit; `above` gathers the mass of the values above it.
// Leaves the mass of the value's own group in s.bin_mass.
__device__ __noinline__ float refine(Shared& s, const Source& src, int level, unsigned prefix, float floor, bool by_count,
                        u64 rank, u64 limit, u64& above) {
  for (; level < 3; ++level) {
    histogram(s, src, level, prefix, floor);
    choose(s, level, by_count, rank, limit - above);
    rank -= s.excl_count;
    above += s.excl_mass;
    prefix = (prefix << (level == 2 ? 9 : 11)) | static_cast<unsigned>(s.chosen);
  }
  return __uint_as_float(prefix);
}

// The inverse CDF in index order over the values at least `threshold`: the first whose inclusive
// cumulative mass exceeds `target` (< the total of those masses).
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
};

__device__ int select_and_draw(Shared& s, const Source& src, const Row& r, int k, float p, unsigned k_bin,
                               u64 k_excl_count, u64 k_excl_mass, u64 total) {
  const bool use_k = k > 0, use_p = p < 1.0f;  // k is 0 when top-k keeps every positive value
  float threshold = 0.0f;
  u64 kept = total;
  if (use_k) {
    u64 above = k_excl_mass;
    threshold = refine(s, src, 1, k_bin, 0.0f, true, static_cast<u64>(k) - k_excl_count, 0, above);
    kept = above + s.bin_mass;  // every value at least the k-th
  }
  if (use_p) {
    const u64 limit = max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(kept)), u64{1});
    u64 above = 0;
    const float t = refine(s, src, 0, 0u, threshold, false, 0, limit, above);
    threshold = t;
    kept = above + s.bin_mass;
  }
  const double u = philox_uniform(r.seed, blockIdx.x);
  u64 target = static_cast<u64>(u * static_cast<double>(kept));
  if (target >= kept) target = kept - 1;
  return draw(s, src, threshold, target);
}

__global__ void __launch_bounds__(kThreads, 1) sample_rows(Row r) {
  __shared__ Shared s;
  const float* x = r.probs + static_cast<long long>(blockIdx.x) * r.row_stride;
  const Source row{x, nullptr, r.vocab, (reinterpret_cast<uintptr_t>(x) & 15) == 0};
  const int k_in = r.top_k[blockIdx.x * r.k_stride];
  const float p = r.top_p[blockIdx.x * r.p_stride];

  // The first digit over the whole row: the bin of the k-th largest value, or of the top-p boundary.
  histogram(s, row, 0, 0u, 0.0f);
  u64 total = 0, positive = 0, ignored = 0;
  {
    u64 mass = 0, count = 0;
    for (int j = 0; j < kBinsPer; ++j) mass += bin_mass(s, kBinsPer * threadIdx.x + j), count += s.count[kBinsPer * threadIdx.x + j];
    Scan(s.scan).ExclusiveSum(mass, ignored, total);
    __syncthreads();
    Scan(s.scan).ExclusiveSum(count, ignored, positive);
    __syncthreads();
  }
  if (total == 0) {  // no probability anywhere: not a distribution; token 0 rather than garbage
    if (threadIdx.x == 0) r.out[blockIdx.x * r.out_stride] = 0;
    return;
  }
  // A k at least the number of positive values keeps them all: no top-k (zeros are never drawn).
  const int k = k_in > 0 && static_cast<u64>(k_in) < positive ? k_in : 0;
  const bool use_k = k > 0, use_p = p < 1.0f;
  int lowest = -1;  // the lowest bin a kept token can lie in
  u64 k_excl_count = 0, k_excl_mass = 0, candidates = 0;
  if (use_k || use_p) {
    const u64 limit = use_p ? max(static_cast<u64>(static_cast<double>(p) * static_cast<double>(total)), u64{1}) : 0;
    choose(s, 0, use_k, static_cast<u64>(k), limit);
    lowest = s.chosen;
    k_excl_count = s.excl_count, k_excl_mass = s.excl_mass;
    candidates = s.excl_count + s.bin_count;
  }
  // With top-k the chosen bin is the k-th value's (top-p runs inside K, over the same bins or higher);
  // without it, the top-p bin of the whole row.
  Source src = row;
  if (lowest >= 0 && candidates <= kCapacity) {
    u64 carry = 0;
    for (int base = 0; base < r.vocab; base += kTile) {
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
    src = Source{s.value, s.index, static_cast<int>(carry), true};
  }
  const int token = select_and_draw(s, src, r, k, p, static_cast<unsigned>(lowest), k_excl_count, k_excl_mass, total);
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
  bool seeded = false;
  for (int i = 0; i < call->num_scalars; ++i)
    if (call->scalars[i].name && std::strcmp(call->scalars[i].name, "seed") == 0)
      r.seed = static_cast<u64>(call->scalars[i].i), seeded = true;
  if (!seeded) return fail(call, "top_k_top_p: no scalar 'seed'");
  if (rows == 0) return 0;
  sample_rows<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(r);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return fail(call, "top_k_top_p: launch failed: %s", cudaGetErrorString(e));
  return 0;
}
