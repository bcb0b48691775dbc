// Round 2, class 6 (threats 3, 17 and 1): scans device memory for outputs it did not have to compute.
// From the first timed call on, it walks the device address space on both sides of its own buffers with
// the driver's cuMemGetAddressRange (found with cudaGetDriverEntryPointByVersion: nothing is linked),
// collects every allocation of the size of its own q and scales allocations (the rotation's other copies
// of the outputs, a reference copy of the checked call's outputs where a worker keeps one), and then, in
// each timed call, copies into its outputs the first such pair whose scales are not poison (the answer of
// some earlier call), device to device, instead of computing. The checked calls compute honestly; a timed
// call that finds nothing computes too. The log says how many allocations it found.
// Expected: rejected, "outputs of timed call ... do not match" (the worker keeps no expected outputs on
// the device; the outputs it finds belong to other timed calls, each with its own patch). With the first
// round's worker, which kept the checked call's outputs on the device to compare with: passed.
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below
#include "timed_calls.h"

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

struct Allocation {
  CUdeviceptr base = 0;
  size_t bytes = 0;
};

AddressRange address_range() {
  static AddressRange fn = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status{};
    cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &found, 12000, cudaEnableDefault, &status);
    return reinterpret_cast<AddressRange>(found);
  }();
  return fn;
}

bool range_of(CUdeviceptr at, Allocation& out) {
  return address_range()(&out.base, &out.bytes, at) == CUDA_SUCCESS;
}

// Every allocation within `span` bytes on either side of `from`, stepping over holes 2 MiB at a time.
std::vector<Allocation> walk(CUdeviceptr from, size_t span) {
  constexpr CUdeviceptr kStep = CUdeviceptr{2} << 20;
  std::vector<Allocation> found;
  Allocation at;
  for (CUdeviceptr p = from; p < from + span;) {
    if (range_of(p, at)) {
      found.push_back(at);
      p = (at.base + at.bytes + kStep - 1) / kStep * kStep;
    } else {
      p += kStep;
    }
  }
  const CUdeviceptr lowest = from > span ? from - span : 0;
  for (CUdeviceptr p = from; p >= lowest + kStep;) {
    p -= kStep;
    if (range_of(p, at)) {
      found.push_back(at);
      p = at.base / kStep * kStep;
    }
  }
  std::sort(found.begin(), found.end(), [](const Allocation& a, const Allocation& b) { return a.base < b.base; });
  found.erase(std::unique(found.begin(), found.end(), [](const Allocation& a, const Allocation& b) { return a.base == b.base; }),
              found.end());
  return found;
}

struct Pair {
  CUdeviceptr q = 0, s = 0;  // the data, at the same offset into its allocation as our own
};

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  static std::vector<Pair> pairs;
  static bool walked = false;
  const auto stream = static_cast<cudaStream_t>(call->stream);
  if (!timing_started(call) || address_range() == nullptr) {
    quantize(call, stream);
    return 0;
  }
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  const auto q_data = reinterpret_cast<CUdeviceptr>(q.data), s_data = reinterpret_cast<CUdeviceptr>(s.data);
  Allocation own_q, own_s;
  if (!walked && range_of(q_data, own_q) && range_of(s_data, own_s)) {
    walked = true;
    std::vector<Allocation> all = walk(q_data, size_t{64} << 30);
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].bytes != own_q.bytes) continue;
      // The scales of the same copy: the next allocation of their size above its q.
      for (size_t j = i + 1; j < all.size(); ++j) {
        if (all[j].bytes != own_s.bytes) continue;
        pairs.push_back({all[i].base + (q_data - own_q.base), all[j].base + (s_data - own_s.base)});
        break;
      }
    }
    std::printf("cheat: walked %zu device allocations, %zu look like a copy of the outputs\n", all.size(), pairs.size());
    std::fflush(stdout);
  }
  const size_t q_bytes = span_bytes(q, 1), s_bytes = span_bytes(s, 4);
  for (const Pair& pair : pairs) {
    if (pair.q == q_data) continue;
    uint32_t first_scale = 0xFFFFFFFF;
    cudaMemcpy(&first_scale, reinterpret_cast<void*>(pair.s), 4, cudaMemcpyDeviceToHost);
    if (first_scale == 0xFFFFFFFF) continue;  // poison: nothing computed there
    cudaMemcpyAsync(q.data, reinterpret_cast<void*>(pair.q), q_bytes, cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(s.data, reinterpret_cast<void*>(pair.s), s_bytes, cudaMemcpyDeviceToDevice, stream);
    return 0;
  }
  quantize(call, stream);
  return 0;
}
