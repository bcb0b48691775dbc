// The schedule: runs start in plan order within a limit per endpoint and a limit for the campaign.
#include <gtest/gtest.h>

#include "campaign/schedule.hpp"

namespace d2k::campaign {
namespace {

TEST(Schedule, LimitsPerEndpointAndInAll) {
  Schedule s(3, 2);
  s.add("a1", "http://a");
  s.add("a2", "http://a");
  s.add("a3", "http://a");
  s.add("b1", "http://b");
  s.add("b2", "http://b");
  EXPECT_EQ(s.next(), "a1");
  EXPECT_EQ(s.next(), "a2");
  EXPECT_EQ(s.next(), "b1");  // a is full: the next run of another endpoint goes first
  EXPECT_FALSE(s.next());     // three in all
  EXPECT_EQ(s.running_on("http://a"), 2);
  s.done("b1");
  EXPECT_EQ(s.next(), "b2");
  s.done("a1");
  EXPECT_EQ(s.next(), "a3");
  EXPECT_EQ(s.waiting(), 0u);
  EXPECT_FALSE(s.next());
  EXPECT_THROW(s.add("a1", "http://a"), std::exception);
}

}  // namespace
}  // namespace d2k::campaign
