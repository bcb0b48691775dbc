#include "timing/rotation.hpp"

#include <gtest/gtest.h>

using namespace d2k;

namespace {

constexpr std::size_t MB = std::size_t{1} << 20;
constexpr std::size_t kL2 = 60 * MB;  // the H200's
constexpr std::size_t kBudget = std::size_t{4} << 30;

}  // namespace

TEST(RotationSets, EnoughCopiesToHoldSeveralTimesTheCache) {
  TimingConfig config;  // 3x the cache
  EXPECT_EQ(rotation_sets(24 * MB, 0, kL2, kBudget, config), 8);   // 180 / 24 = 7.5
  EXPECT_EQ(rotation_sets(89 * MB, 0, kL2, kBudget, config), 3);   // fp8_group_quant T4096: 2.02
  EXPECT_EQ(rotation_sets(60 * MB, 0, kL2, kBudget, config), 3);
  config.rotate_cache_multiple = 2;
  EXPECT_EQ(rotation_sets(24 * MB, 0, kL2, kBudget, config), 5);
}

TEST(RotationSets, TwoCopiesEvenForASetLargerThanTheTarget) {
  TimingConfig config;
  EXPECT_EQ(rotation_sets(537 * MB, 0, kL2, kBudget, config), 2);
  // Unless two do not fit.
  EXPECT_EQ(rotation_sets(3 * (kBudget / 4), 0, kL2, kBudget, config), 1);
}

TEST(RotationSets, CappedByCountAndMemory) {
  TimingConfig config;
  EXPECT_EQ(rotation_sets(1024, 0, kL2, kBudget, config), 64);
  config.rotate_max_sets = 5;
  EXPECT_EQ(rotation_sets(1024, 0, kL2, kBudget, config), 5);
  config.rotate_max_sets = 64;
  // Guard regions count against the budget, not towards the cache multiple.
  EXPECT_EQ(rotation_sets(1 * MB, 1 * MB, kL2, 20 * MB, config), 10);
  EXPECT_EQ(rotation_sets(10 * MB, 0, kL2, 25 * MB, config), 2);
  EXPECT_EQ(rotation_sets(30 * MB, 0, kL2, 25 * MB, config), 1);
}

TEST(RotationSets, OneCopyWhenRotationIsOffOrThereIsNothingToRotate) {
  TimingConfig config;
  EXPECT_EQ(rotation_sets(0, 0, kL2, kBudget, config), 1);
  config.rotate_cache_multiple = 0;
  EXPECT_EQ(rotation_sets(24 * MB, 0, kL2, kBudget, config), 1);
  config.rotate_cache_multiple = 3;
  config.rotate_max_sets = 0;  // nonsense is read as one
  EXPECT_EQ(rotation_sets(24 * MB, 0, kL2, kBudget, config), 1);
}

TEST(RotationSets, TheCpuCacheIsKnownOrAssumed) {
  const std::size_t bytes = last_level_cache_bytes(Device::cpu);
  EXPECT_GE(bytes, std::size_t{256} << 10);
  EXPECT_LE(bytes, std::size_t{4} << 30);
}
