// CUDA runtime helpers shared by the timing code and the worker: error checks that throw d2k::Error
// with the error's name, and owners of device memory, events and streams. Only with D2K_WITH_CUDA.
#pragma once

#ifdef D2K_WITH_CUDA
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/error.hpp"

namespace d2k {

// "cudaErrorIllegalAddress: an illegal memory access was encountered"
inline std::string cuda_error_text(cudaError_t error) {
  return fmt::format("{}: {}", cudaGetErrorName(error), cudaGetErrorString(error));
}

inline void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) fail("{} failed: {}", what, cuda_error_text(error));
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaEvent {
 public:
  CudaEvent() { check_cuda(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaStream {
 public:
  // Non-blocking: it does not wait for the legacy default stream, nor that for it.
  CudaStream() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~CudaStream() { cudaStreamDestroy(stream_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Milliseconds between two recorded events.
inline double elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start.get(), end.get()), "cudaEventElapsedTime");
  return ms;
}

}  // namespace d2k
#endif
