// Moving tensors between libtorch and the raw bytes the worker protocol carries.
#pragma once

#include <ATen/ATen.h>

#include <string_view>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/task.hpp"

namespace d2k {

at::ScalarType to_torch(DType dtype);
DType from_torch(at::ScalarType type);
at::Device to_torch(Device device);

// A tensor laid out exactly as `geometry` says (its storage holds geometry.span() elements), with the
// values of `logical` (same shape, any layout, any device) converted to `dtype`, in one pass.
at::Tensor lay_out(const at::Tensor& logical, const Geometry& geometry, DType dtype);

// The geometry.span() elements of a CPU tensor made by lay_out, as raw bytes (a view of its storage).
std::string_view span_view(const at::Tensor& laid_out);
// A tensor on `device` laid out as `geometry` holding a copy of `bytes` (geometry.span() elements of
// `dtype`). Throws d2k::Error when the size does not match.
at::Tensor tensor_from_bytes(std::string_view bytes, DType dtype, const Geometry& geometry, Device device = Device::cpu);

// Float64 copy of a floating tensor, int64 copy of an integer one, on the CPU, contiguous.
at::Tensor widen(const at::Tensor& tensor);

}  // namespace d2k
