// The items' order per sample: a permutation, different for each sample, the same for the same seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "judge/order.hpp"
#include "judge_fixture.hpp"

namespace d2k::judge {
namespace {

TEST(JudgeOrder, EverySampleSeesEveryItemOnceInItsOwnOrder) {
  const auto ids = testing::tiny_ids();
  for (uint64_t seed : {0ULL, 1ULL, 42ULL, 0xFFFFFFFFFFFFFFFFULL}) {
    const auto orders = sample_orders(ids, 5, seed);
    ASSERT_EQ(orders.size(), 5u);
    std::set<std::vector<std::string>> distinct(orders.begin(), orders.end());
    EXPECT_EQ(distinct.size(), 5u) << "seed " << seed;
    for (auto order : orders) {
      std::sort(order.begin(), order.end());
      EXPECT_EQ(order, ids);
    }
  }
}

TEST(JudgeOrder, TheSameSeedGivesTheSameOrdersAndMoreSamplesExtendThem) {
  const auto ids = testing::tiny_ids();
  const auto three = sample_orders(ids, 3, 7);
  EXPECT_EQ(three, sample_orders(ids, 3, 7));
  const auto five = sample_orders(ids, 5, 7);
  EXPECT_TRUE(std::equal(three.begin(), three.end(), five.begin()));
  EXPECT_NE(three, sample_orders(ids, 3, 8));
}

TEST(JudgeOrder, TwoItemsGiveTwoOrdersThenRepeat) {
  const auto orders = sample_orders({"a", "b"}, 3, 3);
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_EQ(orders.size(), 3u);
}

}  // namespace
}  // namespace d2k::judge
