#include <gtest/gtest.h>

#include <cmath>

#include "agent/budget.hpp"

using d2k::agent::Budget;
using d2k::agent::invalid;

TEST(Budget, NegativeBudgetsAreRefusedNamingTheOptionAndValue) {
  EXPECT_FALSE(invalid(Budget{}));
  Budget zero;
  zero.max_tokens_total = 0;
  zero.max_cost_usd = 0;
  zero.max_wall_seconds = 0;
  EXPECT_FALSE(invalid(zero)) << "zero is a budget that is spent at once, not an error";

  auto refusal = [](auto set) {
    Budget budget;
    set(budget);
    return invalid(budget).value_or("");
  };
  EXPECT_EQ(refusal([](Budget& b) { b.max_turns = 0; }), "--turns: must be at least 1, not 0");
  EXPECT_EQ(refusal([](Budget& b) { b.max_turns = -3; }), "--turns: must be at least 1, not -3");
  EXPECT_EQ(refusal([](Budget& b) { b.max_tokens_total = -1; }), "--max-tokens-total: must be at least 0, not -1");
  EXPECT_EQ(refusal([](Budget& b) { b.max_cost_usd = -0.5; }), "--max-cost-usd: must be at least 0, not -0.5");
  EXPECT_EQ(refusal([](Budget& b) { b.max_wall_seconds = -10; }), "--max-wall-seconds: must be at least 0, not -10");
  EXPECT_EQ(refusal([](Budget& b) { b.max_cost_usd = std::nan(""); }), "--max-cost-usd: must be at least 0, not nan");
}
