#include "worker/buffers.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "core/error.hpp"
#include "timing/cuda_util.hpp"

namespace d2k {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::vector<unsigned char> pattern(uint64_t seed, std::size_t bytes) {
  std::vector<unsigned char> out(bytes);
  uint64_t state = seed;
  for (std::size_t i = 0; i < bytes; i += 8) {
    uint64_t word = splitmix64(state);
    std::memcpy(out.data() + i, &word, std::min<std::size_t>(8, bytes - i));
  }
  return out;
}

int64_t count_changed(const std::vector<unsigned char>& want, const std::vector<unsigned char>& got) {
  int64_t changed = 0;
  for (std::size_t i = 0; i < want.size(); ++i) changed += want[i] != got[i];
  return changed;
}

#ifndef D2K_WITH_CUDA
[[noreturn]] void no_cuda() { fail("the cuda device needs d2k built with CUDA"); }
#endif

}  // namespace

uint64_t unpredictable_seed() {
  uint64_t seed = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  seed ^= static_cast<uint64_t>(::getpid()) << 32;
  seed ^= reinterpret_cast<uintptr_t>(&seed);
  return seed;
}

GuardedBuffer::GuardedBuffer(Device device, std::string name, std::size_t bytes, uint64_t seed)
    : device_(device), name_(std::move(name)), bytes_(bytes) {
  std::size_t total = bytes + 2 * kGuardBytes;
  if (device == Device::cpu) {
    std::size_t rounded = (total + 4095) / 4096 * 4096;
    base_ = static_cast<unsigned char*>(std::aligned_alloc(4096, rounded));
    if (base_ == nullptr) fail("cannot allocate {} bytes of host memory for '{}'", total, name_);
  } else {
#ifdef D2K_WITH_CUDA
    void* base = nullptr;
    cudaError_t error = cudaMalloc(&base, total);
    if (error != cudaSuccess)
      fail("cannot allocate {} bytes on the GPU for '{}': {}", total, name_, cuda_error_text(error));
    base_ = static_cast<unsigned char*>(base);
#else
    no_cuda();
#endif
  }
  uint64_t name_hash = std::hash<std::string>{}(name_);
  before_ = pattern(seed ^ name_hash, kGuardBytes);
  after_ = pattern(seed ^ ~name_hash, kGuardBytes);
  copy_in(0, before_.data(), kGuardBytes);
  copy_in(kGuardBytes + bytes_, after_.data(), kGuardBytes);
}

GuardedBuffer::~GuardedBuffer() {
  if (device_ == Device::cpu) {
    std::free(base_);
  } else {
#ifdef D2K_WITH_CUDA
    cudaFree(base_);
#endif
  }
}

void GuardedBuffer::copy_in(std::size_t offset, const void* source, std::size_t bytes) {
  if (bytes == 0) return;
  if (device_ == Device::cpu) {
    std::memcpy(base_ + offset, source, bytes);
    return;
  }
#ifdef D2K_WITH_CUDA
  check_cuda(cudaMemcpy(base_ + offset, source, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  // Pageable copies may still be in flight when cudaMemcpy returns; the solution's non-blocking
  // stream would not wait for them.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a copy to the GPU");
#endif
}

void GuardedBuffer::copy_out(std::size_t offset, void* target, std::size_t bytes) const {
  if (bytes == 0) return;
  if (device_ == Device::cpu) {
    std::memcpy(target, base_ + offset, bytes);
    return;
  }
#ifdef D2K_WITH_CUDA
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a copy from the GPU");
  check_cuda(cudaMemcpy(target, base_ + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
#endif
}

void GuardedBuffer::upload(const std::string& bytes) {
  if (bytes.size() != bytes_) fail("'{}': {} bytes given for a buffer of {}", name_, bytes.size(), bytes_);
  copy_in(kGuardBytes, bytes.data(), bytes.size());
}

std::string GuardedBuffer::download() const {
  std::string out(bytes_, '\0');
  copy_out(kGuardBytes, out.data(), bytes_);
  return out;
}

void GuardedBuffer::fill(unsigned char byte) {
  if (device_ == Device::cpu) {
    std::memset(data(), byte, bytes_);
    return;
  }
#ifdef D2K_WITH_CUDA
  check_cuda(cudaMemset(data(), byte, bytes_), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cudaMemset");
#endif
}

void GuardedBuffer::copy_from(const GuardedBuffer& other) {
  if (other.bytes_ != bytes_ || other.device_ != device_) fail("'{}': cannot copy from '{}'", name_, other.name_);
  if (device_ == Device::cpu) {
    std::memcpy(data(), other.data(), bytes_);
    return;
  }
#ifdef D2K_WITH_CUDA
  check_cuda(cudaMemcpy(data(), other.data(), bytes_, cudaMemcpyDeviceToDevice), "cudaMemcpy on the GPU");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a copy on the GPU");
#endif
}

std::vector<GuardViolation> GuardedBuffer::check_guards() const {
  std::vector<GuardViolation> violations;
  std::vector<unsigned char> got(kGuardBytes);
  copy_out(0, got.data(), kGuardBytes);
  if (int64_t changed = count_changed(before_, got)) violations.push_back({name_, "before", changed});
  copy_out(kGuardBytes + bytes_, got.data(), kGuardBytes);
  if (int64_t changed = count_changed(after_, got)) violations.push_back({name_, "after", changed});
  return violations;
}

}  // namespace d2k
