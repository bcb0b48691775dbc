// Round 2, class 4 on the GPU (threats 19 and 6): halves every clock the worker's timer reads. In
// d2k_prepare it points (1) every GOT slot of cudaEventElapsedTime, in the worker and every library it
// loaded, at a function that halves what the runtime reports, with mprotect where full RELRO left the
// slot read-only (got_patch.h); (2) every pointer to the driver's cuEventElapsedTime in writable memory
// (the runtime's table of driver entry points, which a worker linked with the static runtime calls
// through instead of a GOT) at one that halves what the driver reports; (3) the host clocks' slots
// (clock_gettime, std::chrono's now) at half-speed clocks (slow_clock.h), so that the timer's host
// cross-check agrees with the halved event times. Every call computes honestly: only the time is forged.
// Expected: rejected, by the second clock. On the H200 (2026-12-01) its slowed host clocks reached
// CUPTI's window bounds too (libcupti's clock_gettime slot is patched with the rest) while the activity
// records keep the device's timestamps: its kernels fall outside the windows, "launched 2 kernels
// outside its calls". The outside clock's slack (50 us + a quarter of the harness's cost per call) is
// larger than the 11 us this halving hides per call on deepseek-v3-T4096. (If seccomp refused mprotect:
// runtime_error, "Operation not permitted".)
#include "honest_quant_cuda.cuh"  // an honest quant/fp8_group_quant kernel; the cheat is below

#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "memory_scan.h"
#include "slow_clock.h"

namespace {

using RuntimeElapsed = cudaError_t (*)(float*, cudaEvent_t, cudaEvent_t);
using DriverElapsed = CUresult (*)(float*, CUevent, CUevent);

// Kept masked, so that the scan for pointers to the driver's function does not find (and patch) these.
constexpr uintptr_t kMask = 0x5a5a5a5a5a5a5a5aULL;
uintptr_t runtime_masked = 0, driver_masked = 0;

thread_local bool driver_halved = false;  // the runtime's call went through the patched driver table

CUresult slow_driver_elapsed(float* ms, CUevent start, CUevent end) {
  const CUresult error = reinterpret_cast<DriverElapsed>(driver_masked ^ kMask)(ms, start, end);
  if (error == CUDA_SUCCESS && ms != nullptr) {
    *ms *= 0.5f;
    driver_halved = true;
  }
  return error;
}

cudaError_t slow_runtime_elapsed(float* ms, cudaEvent_t start, cudaEvent_t end) {
  driver_halved = false;
  const cudaError_t error = reinterpret_cast<RuntimeElapsed>(runtime_masked ^ kMask)(ms, start, end);
  if (error == cudaSuccess && ms != nullptr && !driver_halved) *ms *= 0.5f;
  return error;
}

// Points every 8-byte-aligned word in writable memory that holds one of `masked` (unmasked) at `fake`.
int patch_pointers(const std::vector<uintptr_t>& masked, void* fake) {
  std::vector<uintptr_t> hits;
  scan::each_chunk([&](uintptr_t at, const char* bytes, size_t n) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uintptr_t word;
      std::memcpy(&word, bytes + i, 8);
      for (uintptr_t value : masked)
        if ((word ^ kMask) == value) hits.push_back(at + i);
    }
  }, 0);
  const std::vector<scan::Region> all = scan::regions();
  int patched = 0;
  for (uintptr_t at : hits) {
    const scan::Region* region = scan::region_of(all, reinterpret_cast<void*>(at));
    if (region == nullptr || !region->writable) continue;
    *reinterpret_cast<void**>(at) = fake;
    ++patched;
  }
  return patched;
}

}  // namespace

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::vector<uintptr_t> driver_fns;  // masked
  for (unsigned version : {12000u, 13000u}) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuEventElapsedTime", &fn, version, cudaEnableDefault, &found) == cudaSuccess &&
        fn != nullptr)
      driver_fns.push_back(reinterpret_cast<uintptr_t>(fn) ^ kMask);
  }
  if (!driver_fns.empty()) driver_masked = driver_fns.back();
  const int table_entries = driver_fns.empty() ? 0 : patch_pointers(driver_fns, reinterpret_cast<void*>(&slow_driver_elapsed));

  if (void* runtime = ::dlsym(RTLD_DEFAULT, "cudaEventElapsedTime")) runtime_masked = reinterpret_cast<uintptr_t>(runtime) ^ kMask;
  std::vector<slow::Target> targets = slow::host_targets();
  if (runtime_masked != 0) targets.push_back({"cudaEventElapsedTime", nullptr, reinterpret_cast<void*>(&slow_runtime_elapsed)});
  const slow::Outcome outcome = slow::patch(targets, /*with_mprotect=*/true);
  std::string refused;
  for (const std::string& one : outcome.refused) refused += one + "; ";
  std::printf("cheat: patched %d GOT slots and %d pointers to the driver's cuEventElapsedTime; refused: %s\n",
              outcome.patched, table_entries, refused.c_str());
  std::fflush(stdout);
  if (outcome.patched + table_entries > 0 && refused.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "patched %d GOT slots and %d driver table entries; refused: %s",
                outcome.patched, table_entries, refused.empty() ? "none, but none was found" : refused.c_str());
  return 1;
}

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call, static_cast<cudaStream_t>(call->stream));
  return 0;
}
