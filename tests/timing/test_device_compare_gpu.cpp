// Runs on a GPU machine only (label gpu): the kernel that counts differing bytes between two device
// buffers, on sizes and offsets that exercise both its 16-byte and its byte-wise paths.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#ifdef D2K_WITH_CUDA
#include "timing/cuda_util.hpp"
#include "timing/device_compare.hpp"

using namespace d2k;

namespace {

unsigned long long count_on_gpu(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                                std::size_t offset) {
  DeviceBuffer da(a.size() + offset), db(b.size() + offset), count(sizeof(unsigned long long));
  auto* pa = static_cast<unsigned char*>(da.get()) + offset;
  auto* pb = static_cast<unsigned char*>(db.get()) + offset;
  check_cuda(cudaMemcpy(pa, a.data(), a.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check_cuda(cudaMemcpy(pb, b.data(), b.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check_cuda(cudaMemset(count.get(), 0, sizeof(unsigned long long)), "cudaMemset");
  check_cuda(count_differing_bytes(pa, pb, a.size(), static_cast<unsigned long long*>(count.get()), nullptr),
             "count_differing_bytes");
  unsigned long long host = 0;
  check_cuda(cudaMemcpy(&host, count.get(), sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

}  // namespace

TEST(DeviceCompareGpu, CountsExactlyTheBytesThatDiffer) {
  std::mt19937_64 random(11);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{4097},
                            std::size_t{3} << 20, (std::size_t{24} << 20) + 7}) {
    std::vector<unsigned char> a(bytes);
    for (auto& v : a) v = static_cast<unsigned char>(random());
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}}) {
      EXPECT_EQ(count_on_gpu(a, a, offset), 0u) << bytes << " bytes at offset " << offset;
      std::vector<unsigned char> b = a;
      std::set<std::size_t> changed;
      const std::size_t flips = std::min<std::size_t>(bytes, 37);
      std::uniform_int_distribution<std::size_t> where(0, bytes - 1);
      while (changed.size() < flips) changed.insert(where(random));
      changed.insert(bytes - 1);  // the tail
      for (std::size_t i : changed) b[i] ^= static_cast<unsigned char>(1 + random() % 255);
      EXPECT_EQ(count_on_gpu(a, b, offset), changed.size()) << bytes << " bytes at offset " << offset;
    }
  }
}

#endif
