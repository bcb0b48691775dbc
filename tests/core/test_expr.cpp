// The task.toml formula language: hand-picked cases for each construct and error, and random
// expressions rendered with minimal parentheses, so precedence and associativity are checked against
// a tree whose value is known.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.hpp"
#include "core/expr.hpp"

namespace d2k {
namespace {

using Axes = std::map<std::string, int64_t>;

std::string error_of(std::string_view formula, const Axes& axes) {
  try {
    evaluate(formula, axes);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(Expr, EvaluatesEachConstruct) {
  Axes axes{{"T", 2048}, {"H", 4096}, {"K", 100}, {"num_heads", 32}};
  EXPECT_EQ(evaluate("42", axes), 42.0);
  EXPECT_EQ(evaluate("2.5", axes), 2.5);
  EXPECT_EQ(evaluate(".5 + 1.", axes), 1.5);
  EXPECT_EQ(evaluate("1e-3 * 1000", axes), 1.0);
  EXPECT_EQ(evaluate("T", axes), 2048.0);
  EXPECT_EQ(evaluate("num_heads * 2", axes), 64.0);
  EXPECT_EQ(evaluate("4 * T * H", axes), 4.0 * 2048 * 4096);
  EXPECT_EQ(evaluate("2 + 3 * 4", axes), 14.0);
  EXPECT_EQ(evaluate("(2 + 3) * 4", axes), 20.0);
  EXPECT_EQ(evaluate("10 - 4 - 3", axes), 3.0);    // left associative
  EXPECT_EQ(evaluate("64 / 4 / 2", axes), 8.0);    // left associative
  EXPECT_EQ(evaluate("K / 8", axes), 12.5);        // exact real division
  EXPECT_EQ(evaluate("-K + 1", axes), -99.0);
  EXPECT_EQ(evaluate("--3", axes), 3.0);
  EXPECT_EQ(evaluate("2 * -3", axes), -6.0);
  EXPECT_EQ(evaluate("ceil_div(K, 8)", axes), 13.0);
  EXPECT_EQ(evaluate("ceil_div(H, 128)", axes), 32.0);
  EXPECT_EQ(evaluate("align(K, 16)", axes), 112.0);
  EXPECT_EQ(evaluate("align(T, 4)", axes), 2048.0);
  EXPECT_EQ(evaluate("min(T, H)", axes), 2048.0);
  EXPECT_EQ(evaluate("max(T, H)", axes), 4096.0);
  EXPECT_EQ(evaluate("max(min(K, 7), ceil_div(K, 3)) * 2", axes), 68.0);
  EXPECT_EQ(evaluate("  ceil_div ( T * 2 ,  num_heads )  ", axes), 128.0);
}

TEST(Expr, CeilDivAndAlignMatchIntegerArithmeticOnRandomValues) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> value(1, 1 << 20);
  std::uniform_int_distribution<int64_t> divisor(1, 300);
  for (int i = 0; i < 500; ++i) {
    Axes axes{{"a", value(rng)}, {"b", divisor(rng)}};
    int64_t a = axes["a"], b = axes["b"];
    ASSERT_EQ(evaluate("ceil_div(a, b)", axes), static_cast<double>((a + b - 1) / b)) << a << " " << b;
    ASSERT_EQ(evaluate("align(a, b)", axes), static_cast<double>((a + b - 1) / b * b)) << a << " " << b;
  }
}

// A random expression tree, its value computed alongside, rendered with the fewest parentheses the
// grammar allows (right operands of the same precedence keep theirs, since - and / do not associate).
struct Generated {
  std::string text;
  double value = 0.0;
  int precedence = 4;  // 1 sum, 2 product, 3 unary, 4 atom
};

class ExpressionGenerator {
 public:
  ExpressionGenerator(std::mt19937_64& rng, const Axes& axes) : rng_(rng), axes_(axes) {}

  Generated make(int depth) {
    int choice = pick(depth <= 0 ? 1 : 8);
    switch (choice) {
      case 0: {
        auto it = std::next(axes_.begin(), pick(static_cast<int>(axes_.size()) - 1));
        return {space() + it->first + space(), static_cast<double>(it->second), 4};
      }
      case 1: {
        double number = pick(40) / 4.0;  // quarters print exactly
        return {space() + fmt::format("{}", number) + space(), number, 4};
      }
      case 2: {
        Generated inner = make(depth - 1);
        return {"-" + wrap(inner, inner.precedence < 3), -inner.value, 3};
      }
      case 3:
      case 4: {
        bool is_min = choice == 3;
        Generated a = make(depth - 1), b = make(depth - 1);
        return {std::string(is_min ? "min" : "max") + "(" + a.text + "," + b.text + ")",
                is_min ? std::min(a.value, b.value) : std::max(a.value, b.value), 4};
      }
      default: {
        const char ops[] = {'+', '-', '*', '/'};
        char op = ops[pick(3)];
        int precedence = (op == '+' || op == '-') ? 1 : 2;
        Generated left = make(depth - 1), right = make(depth - 1);
        if (op == '/' && right.value == 0.0) right = {"3", 3.0, 4};
        double value = op == '+' ? left.value + right.value
                       : op == '-' ? left.value - right.value
                       : op == '*' ? left.value * right.value
                                   : left.value / right.value;
        return {wrap(left, left.precedence < precedence) + op + wrap(right, right.precedence <= precedence), value,
                precedence};
      }
    }
  }

 private:
  int pick(int max) { return std::uniform_int_distribution<int>(0, max)(rng_); }
  std::string space() { return pick(3) == 0 ? " " : ""; }
  static std::string wrap(const Generated& g, bool parens) { return parens ? "(" + g.text + ")" : g.text; }

  std::mt19937_64& rng_;
  const Axes& axes_;
};

TEST(Expr, RandomExpressionsParseWithTheRightPrecedence) {
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 2000; ++i) {
    Axes axes{{"T", std::uniform_int_distribution<int64_t>(1, 5000)(rng)},
              {"H", std::uniform_int_distribution<int64_t>(1, 9000)(rng)},
              {"group_size", std::uniform_int_distribution<int64_t>(1, 256)(rng)}};
    ExpressionGenerator generator(rng, axes);
    Generated expected = generator.make(4);
    double got = evaluate(expected.text, axes);
    // Same tree, same operations in the same order: the results are bit-identical.
    ASSERT_EQ(got, expected.value) << expected.text;
    std::set<std::string> names = identifiers(expected.text);
    for (const auto& name : names) ASSERT_TRUE(axes.count(name)) << name;
  }
}

TEST(Expr, IdentifiersListsTheAxesUsed) {
  EXPECT_EQ(identifiers("4 * T * H"), (std::set<std::string>{"H", "T"}));
  EXPECT_EQ(identifiers("ceil_div(K, 128) + align(T, 4) - min(T, 3)"), (std::set<std::string>{"K", "T"}));
  EXPECT_EQ(identifiers("2 * 2.5"), std::set<std::string>{});
  // Function names are not axes; an axis may still be called like one when it is not called.
  EXPECT_EQ(identifiers("max + 1"), std::set<std::string>{"max"});
}

TEST(Expr, ErrorsNameTheFormulaThePositionAndTheProblem) {
  Axes axes{{"T", 8}, {"H", 16}};
  struct Case {
    const char* formula;
    const char* fragment;
  };
  const Case cases[] = {
      {"T * X", "formula 'T * X' at position 4: unknown axis 'X'"},
      {"T $ H", "at position 2: unexpected character '$'"},
      {"T +", "at position 3: unexpected end of formula"},
      {"(T + H", "expected ')' before the end"},
      {"T + H)", "at position 5: unexpected character ')'"},
      {"", "empty formula"},
      {"   ", "empty formula"},
      {"2T", "at position 1: unexpected character 'T'"},
      {"1.5.2", "unexpected character '.'"},
      {"1e", "exponent needs digits"},
      {"sqrt(T)", "at position 0: unknown function 'sqrt'"},
      {"min(T)", "min takes 2 arguments, got 1"},
      {"max(T, H, 3)", "max takes 2 arguments, got 3"},
      {"ceil_div(T, H - 16)", "ceil_div by zero"},
      {"align(T, 0)", "align by zero"},
      {"T / (H - 16)", "at position 2: division by zero"},
      {"T H", "at position 2: unexpected character 'H'"},
      {"min(T,)", "at position 6: unexpected character ')'"},
  };
  for (const auto& c : cases) {
    std::string message = error_of(c.formula, axes);
    EXPECT_NE(message.find(c.fragment), std::string::npos) << c.formula << " -> " << message;
  }
}

TEST(Expr, IdentifiersRejectsSyntaxErrorsButNotUnknownAxes) {
  EXPECT_THROW(identifiers("T +* H"), Error);
  EXPECT_THROW(identifiers("pow(T, 2)"), Error);
  EXPECT_NO_THROW(identifiers("Undeclared * 2"));
}

}  // namespace
}  // namespace d2k
