// Memory the worker hands to a solution: every tensor (and the workspace) sits between two guard
// regions of GUARD_BYTES filled with a pattern the solution cannot predict, so that a write outside
// the tensor is seen afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/call_patch.hpp"
#include "core/device.hpp"
#include "core/worker_protocol.hpp"

namespace d2k {

class GuardedBuffer {
 public:
  static constexpr std::size_t kGuardBytes = std::size_t{64} << 10;

  // Allocates on the device; the guard pattern comes from `seed` and the name. Throws d2k::Error.
  GuardedBuffer(Device device, std::string name, std::size_t bytes, uint64_t seed);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  const std::string& name() const { return name_; }
  void* data() const { return base_ + kGuardBytes; }
  std::size_t bytes() const { return bytes_; }

  void upload(std::string_view bytes);  // exactly bytes() of them
  // The data, handed to `sink` in order: on cuda in pieces through pinned memory (each piece's copy
  // overlaps the sink's work on the one before), on cpu at once from where it lies.
  void read_out(const std::function<void(const char* data, std::size_t size)>& sink) const;
  void fill(unsigned char byte);
  // The data of another buffer of the same size and device (a device-to-device copy on cuda).
  void copy_from(const GuardedBuffer& other);
  Device device() const { return device_; }
  // The keyed digest of the data (core/keyed_digest.hpp), computed where the data is.
  uint64_t digest(uint64_t key) const;
  // Swaps the elements that `swaps` names for `input` (core/call_patch.hpp), elements of `element_bytes`.
  void swap(const std::vector<ElementSwap>& swaps, int input, std::size_t element_bytes);
  // One entry per side whose guard changed, with the count of changed bytes.
  std::vector<GuardViolation> check_guards() const;

 private:
  void copy_in(std::size_t offset, const void* source, std::size_t bytes);
  void copy_out(std::size_t offset, void* target, std::size_t bytes) const;

  Device device_;
  std::string name_;
  std::size_t bytes_;
  unsigned char* base_ = nullptr;
  std::vector<unsigned char> before_, after_;  // the patterns written
};

// A seed nobody can know in advance: the clock, the process id and the address space layout.
uint64_t unpredictable_seed();

}  // namespace d2k
