// Kernels for the GPU tests of tests/timing, written in PTX and loaded at run time (cudaLibraryLoadData):
// the test executables are plain C++, built without nvcc. Each spins one thread for a number of SM
// clock cycles (clock64), so that its duration is known from the events around it; the two differ
// only in their names: one is named like a solution's kernel, the other like the harness's own (the
// mangled d2k::test_spin(unsigned long), prefix "_ZN3d2k").
#pragma once

#ifdef D2K_WITH_CUDA
#include <cuda_runtime.h>

#include <cstdint>

#include "timing/cuda_util.hpp"

namespace d2k::test {

inline constexpr const char* kSolutionSpin = "d2k_test_spin";
inline constexpr const char* kHarnessSpin = "_ZN3d2k9test_spinEm";
inline constexpr const char* kHarnessPrefix = "_ZN3d2k";

#define D2K_SPIN_ENTRY(NAME)                   \
  ".visible .entry " NAME "(.param .u64 cycles)\n" \
  "{\n"                                        \
  "  .reg .u64 %rd<5>;\n"                      \
  "  .reg .pred %p<2>;\n"                      \
  "  ld.param.u64 %rd1, [cycles];\n"           \
  "  mov.u64 %rd2, %clock64;\n"                \
  "SPIN:\n"                                    \
  "  mov.u64 %rd3, %clock64;\n"                \
  "  sub.u64 %rd4, %rd3, %rd2;\n"              \
  "  setp.lt.u64 %p1, %rd4, %rd1;\n"           \
  "  @%p1 bra SPIN;\n"                         \
  "  ret;\n"                                   \
  "}\n"

inline constexpr const char kSpinPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n" D2K_SPIN_ENTRY("d2k_test_spin")
        D2K_SPIN_ENTRY("_ZN3d2k9test_spinEm");
#undef D2K_SPIN_ENTRY

class SpinKernels {
 public:
  SpinKernels() {
    check_cuda(cudaLibraryLoadData(&library_, kSpinPtx, nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData");
    check_cuda(cudaLibraryGetKernel(&solution_, library_, kSolutionSpin), "cudaLibraryGetKernel(solution spin)");
    check_cuda(cudaLibraryGetKernel(&harness_, library_, kHarnessSpin), "cudaLibraryGetKernel(harness spin)");
  }
  ~SpinKernels() { cudaLibraryUnload(library_); }
  SpinKernels(const SpinKernels&) = delete;
  SpinKernels& operator=(const SpinKernels&) = delete;

  // One thread spinning `cycles` SM cycles on `stream`: the solution-named kernel, or the harness-named.
  void spin(cudaStream_t stream, uint64_t cycles, bool harness_named = false) const {
    void* args[] = {&cycles};
    check_cuda(cudaLaunchKernel(reinterpret_cast<const void*>(harness_named ? harness_ : solution_), dim3(1), dim3(1),
                                args, 0, stream),
               "cudaLaunchKernel(spin)");
  }

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t solution_ = nullptr;
  cudaKernel_t harness_ = nullptr;
};

}  // namespace d2k::test
#endif
