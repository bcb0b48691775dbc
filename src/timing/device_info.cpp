#include "timing/device_info.hpp"

#include <unistd.h>

#include <fstream>

#include "core/error.hpp"
#include "timing/cuda_util.hpp"

namespace d2k {
namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("model name")) continue;
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::size_t begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? std::string() : line.substr(begin);
  }
  return "unknown CPU";
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

#ifdef D2K_WITH_CUDA
cudaDeviceProp current_properties() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return properties;
}
#endif

}  // namespace

std::string device_name(Device device) {
  if (device == Device::cpu) return cpu_model_name();
#ifdef D2K_WITH_CUDA
  return current_properties().name;
#else
  fail("no cuda device: d2k was built without CUDA");
#endif
}

std::string device_id(Device device) {
  if (device == Device::cpu) return cpu_model_name() + "@" + host_name();
#ifdef D2K_WITH_CUDA
  cudaDeviceProp properties = current_properties();
  const auto* b = reinterpret_cast<const unsigned char*>(properties.uuid.bytes);
  // The layout nvidia-smi prints, so a person can match it.
  return fmt::format(
      "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:"
      "02x}",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
#else
  fail("no cuda device: d2k was built without CUDA");
#endif
}

}  // namespace d2k
