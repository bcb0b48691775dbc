// The worker's device-side helpers (timing/device_patch.hpp) agree with the host's: the keyed digest of
// a buffer on the GPU is the orchestrator's digest of the same bytes, and a patch's swaps on the GPU are
// the host's.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "core/call_patch.hpp"
#include "core/keyed_digest.hpp"
#include "timing/cuda_util.hpp"
#include "timing/device_patch.hpp"

using namespace d2k;

TEST(DevicePatchGpu, TheDigestOnTheGpuIsTheHostsOfTheSameBytes) {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{5}, std::size_t{4096}, (std::size_t{3} << 20) + 7}) {
    std::vector<unsigned char> host(bytes);
    std::mt19937 random(static_cast<unsigned>(bytes));
    for (auto& b : host) b = static_cast<unsigned char>(random());
    DeviceBuffer device(std::max<std::size_t>(bytes, 8)), scratch(8);
    if (bytes) check_cuda(cudaMemcpy(device.get(), host.data(), bytes, cudaMemcpyHostToDevice), "upload");
    uint64_t digest = 0;
    check_cuda(device_digest(1234, device.get(), bytes, static_cast<unsigned long long*>(scratch.get()), nullptr, &digest),
               "device_digest");
    EXPECT_EQ(digest, keyed_digest(1234, host.data(), bytes)) << bytes << " bytes";
  }
}

TEST(DevicePatchGpu, SwapsOnTheGpuAreTheHosts) {
  const std::vector<WireTensor> inputs = {
      WireTensor{.name = "x", .dtype = DType::bf16, .shape = {64, 96}, .strides = {128, 1}, .perturb = true}};
  std::vector<uint16_t> host(64 * 128);
  std::iota(host.begin(), host.end(), uint16_t{0});
  DeviceBuffer device(host.size() * 2), offsets(1024);
  check_cuda(cudaMemcpy(device.get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice), "upload");
  const auto patch = call_patch(5, 17, inputs, 8);
  std::vector<int64_t> pairs;
  for (const auto& s : patch) pairs.push_back(s.a);
  for (const auto& s : patch) pairs.push_back(s.b);
  check_cuda(cudaMemcpy(offsets.get(), pairs.data(), pairs.size() * 8, cudaMemcpyHostToDevice), "offsets");
  check_cuda(device_swap(device.get(), 2, static_cast<const int64_t*>(offsets.get()), static_cast<int>(patch.size()), nullptr),
             "device_swap");
  apply_swaps(patch, 0, host.data(), 2);
  std::vector<uint16_t> back(host.size());
  check_cuda(cudaMemcpy(back.data(), device.get(), back.size() * 2, cudaMemcpyDeviceToHost), "download");
  EXPECT_EQ(back, host);
}
