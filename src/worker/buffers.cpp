#include "worker/buffers.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "core/error.hpp"
#include "core/keyed_digest.hpp"
#include "core/splitmix.hpp"
#include "timing/cuda_util.hpp"
#ifdef D2K_WITH_CUDA
#include "timing/device_patch.hpp"
#endif

namespace d2k {
namespace {

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

void GuardedBuffer::upload(std::string_view bytes) {
  if (bytes.size() != bytes_) fail("'{}': {} bytes given for a buffer of {}", name_, bytes.size(), bytes_);
  copy_in(kGuardBytes, bytes.data(), bytes.size());
}

#ifdef D2K_WITH_CUDA
namespace {

// Two pinned halves and the stream that fills them, made once and kept for the process (never freed:
// the worker ends with _exit, and the CUDA runtime's teardown order is not ours to meet).
struct PinnedStaging {
  static constexpr std::size_t kHalfBytes = std::size_t{8} << 20;
  char* half[2] = {};
  cudaEvent_t filled[2] = {};
  cudaStream_t stream = nullptr;
};

PinnedStaging& pinned_staging() {
  static PinnedStaging* staging = [] {
    auto* made = new PinnedStaging;
    void* memory = nullptr;
    if (cudaMallocHost(&memory, 2 * PinnedStaging::kHalfBytes) != cudaSuccess) {
      (void)cudaGetLastError();  // pageable halves still work, with copies that do not overlap
      memory = new char[2 * PinnedStaging::kHalfBytes];
    }
    made->half[0] = static_cast<char*>(memory);
    made->half[1] = made->half[0] + PinnedStaging::kHalfBytes;
    check_cuda(cudaStreamCreateWithFlags(&made->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    for (auto& event : made->filled) check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    return made;
  }();
  return *staging;
}

}  // namespace
#endif

void GuardedBuffer::read_out(const std::function<void(const char* data, std::size_t size)>& sink) const {
  if (bytes_ == 0) return;
  if (device_ == Device::cpu) {
    sink(static_cast<const char*>(data()), bytes_);
    return;
  }
#ifdef D2K_WITH_CUDA
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a copy from the GPU");
  PinnedStaging& staging = pinned_staging();
  const auto* source = static_cast<const char*>(data());
  const std::size_t chunks = (bytes_ + PinnedStaging::kHalfBytes - 1) / PinnedStaging::kHalfBytes;
  auto chunk_bytes = [&](std::size_t k) { return std::min(PinnedStaging::kHalfBytes, bytes_ - k * PinnedStaging::kHalfBytes); };
  auto start = [&](std::size_t k) {
    check_cuda(cudaMemcpyAsync(staging.half[k % 2], source + k * PinnedStaging::kHalfBytes, chunk_bytes(k),
                               cudaMemcpyDeviceToHost, staging.stream),
               "cudaMemcpyAsync from the GPU");
    check_cuda(cudaEventRecord(staging.filled[k % 2], staging.stream), "cudaEventRecord");
  };
  start(0);
  for (std::size_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) start(k + 1);
    check_cuda(cudaEventSynchronize(staging.filled[k % 2]), "waiting for a copy from the GPU");
    sink(staging.half[k % 2], chunk_bytes(k));
  }
#else
  no_cuda();
#endif
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

#ifdef D2K_WITH_CUDA
namespace {

// Scratch device memory of the harness's helpers, grown as needed and kept for the process.
void* device_scratch(std::size_t bytes) {
  static void* scratch = nullptr;
  static std::size_t held = 0;
  if (bytes > held) {
    if (scratch) cudaFree(scratch);
    scratch = nullptr;
    held = 0;
    check_cuda(cudaMalloc(&scratch, bytes), "cudaMalloc of the harness's scratch");
    held = bytes;
  }
  return scratch;
}

}  // namespace
#endif

uint64_t GuardedBuffer::digest(uint64_t key) const {
  if (device_ == Device::cpu) return keyed_digest(key, data(), bytes_);
#ifdef D2K_WITH_CUDA
  uint64_t digest = 0;
  auto* scratch = static_cast<unsigned long long*>(device_scratch(sizeof(unsigned long long)));
  check_cuda(device_digest(key, data(), bytes_, scratch, nullptr, &digest), "the digest of a buffer");
  return digest;
#else
  no_cuda();
#endif
}

void GuardedBuffer::swap(const std::vector<ElementSwap>& swaps, int input, std::size_t element_bytes) {
  if (device_ == Device::cpu) return apply_swaps(swaps, input, data(), element_bytes);
#ifdef D2K_WITH_CUDA
  std::vector<int64_t> offsets;
  for (const auto& s : swaps)
    if (s.input == input) offsets.push_back(s.a);
  const std::size_t count = offsets.size();
  if (count == 0) return;
  for (const auto& s : swaps)
    if (s.input == input) offsets.push_back(s.b);
  auto* device_offsets = static_cast<int64_t*>(device_scratch(std::max<std::size_t>(offsets.size() * sizeof(int64_t), 8)));
  check_cuda(cudaMemcpy(device_offsets, offsets.data(), offsets.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
             "cudaMemcpy of a patch");
  check_cuda(device_swap(data(), element_bytes, device_offsets, static_cast<int>(count), nullptr), "a patch's swaps");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a patch");
#else
  no_cuda();
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
