// d2k links only libtorch's CPU half. The cuda device loads libtorch_cuda.so (beside libtorch_cpu.so)
// at run time, which registers torch's CUDA kernels; so one build runs in CI and on the GPU machine.
#pragma once

#include "core/device.hpp"

namespace d2k {

// Makes `device` usable by the references; throws d2k::Error saying why not.
void require_torch_device(Device device);

}  // namespace d2k
