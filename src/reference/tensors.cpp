#include "reference/tensors.hpp"

#include <cstring>

#include "core/error.hpp"

namespace d2k {

at::ScalarType to_torch(DType dtype) {
  switch (dtype) {
    case DType::f32: return at::kFloat;
    case DType::f16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
    case DType::f8e4m3: return at::kFloat8_e4m3fn;
    case DType::i32: return at::kInt;
    case DType::i64: return at::kLong;
    case DType::i8: return at::kChar;
    case DType::u8: return at::kByte;
    case DType::f64: return at::kDouble;
  }
  fail("unknown dtype {}", static_cast<int>(dtype));
}

DType from_torch(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return DType::f32;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kFloat8_e4m3fn: return DType::f8e4m3;
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    case at::kChar: return DType::i8;
    case at::kByte: return DType::u8;
    case at::kDouble: return DType::f64;
    default: fail("torch dtype {} has no d2k dtype", c10::toString(type));
  }
}

at::Device to_torch(Device device) { return device == Device::cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU); }

at::Tensor lay_out(const at::Tensor& logical, const Geometry& geometry, DType dtype) {
  auto out = at::empty_strided(geometry.shape, geometry.strides, logical.options().dtype(to_torch(dtype)));
  out.copy_(logical);
  return out;
}

std::string_view span_view(const at::Tensor& laid_out) {
  if (!laid_out.device().is_cpu()) fail("span_view of a tensor on {}", laid_out.device().str());
  // The storage behind a lay_out tensor starts at its first element and holds exactly its span.
  const auto bytes = laid_out.storage().nbytes() - laid_out.storage_offset() * laid_out.element_size();
  return {static_cast<const char*>(laid_out.data_ptr()), static_cast<std::size_t>(bytes)};
}

at::Tensor tensor_from_bytes(std::string_view bytes, DType dtype, const Geometry& geometry, Device device) {
  const auto span = geometry.span();
  const auto expected = static_cast<std::size_t>(span) * size_of(dtype);
  if (bytes.size() != expected) fail("{} bytes for a tensor that spans {}", bytes.size(), expected);
  const auto options = at::TensorOptions().dtype(to_torch(dtype));
  auto storage = at::empty({span}, options.device(to_torch(device)));
  if (device == Device::cpu) {
    std::memcpy(storage.data_ptr(), bytes.data(), bytes.size());  // the bytes may sit at any alignment
  } else {
    // Straight from where the bytes arrived: no host copy of hundreds of MB first (a copy engine does
    // not mind their alignment).
    storage.copy_(at::from_blob(const_cast<char*>(bytes.data()), {span}, options));
  }
  return storage.as_strided(geometry.shape, geometry.strides);
}

at::Tensor widen(const at::Tensor& tensor) {
  const bool floating = at::isFloatingType(tensor.scalar_type());
  return tensor.to(at::kCPU).to(floating ? at::kDouble : at::kLong).contiguous();
}

}  // namespace d2k
