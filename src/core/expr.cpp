// A recursive-descent parser into a small tree, so that identifiers() can walk a formula without
// values and evaluate() reports an unknown axis at the position where it is used.
#include "core/expr.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <memory>
#include <vector>

#include "core/error.hpp"

namespace d2k {
namespace {

enum class Kind { number, axis, negate, add, subtract, multiply, divide, call };

struct Node {
  Kind kind = Kind::number;
  std::size_t position = 0;
  double number = 0.0;
  std::string name;  // axis or function name
  std::vector<std::unique_ptr<Node>> children;
};
using NodePtr = std::unique_ptr<Node>;

constexpr std::string_view kFunctions[] = {"ceil_div", "align", "min", "max"};

bool is_function(std::string_view name) {
  for (auto function : kFunctions) {
    if (function == name) return true;
  }
  return false;
}

[[noreturn]] void formula_error(std::string_view formula, std::size_t position, const std::string& what) {
  fail("formula '{}' at position {}: {}", formula, position, what);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  NodePtr parse() {
    skip_space();
    if (at_end()) formula_error(text_, pos_, "empty formula");
    NodePtr root = sum();
    skip_space();
    if (!at_end()) unexpected();
    return root;
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  [[noreturn]] void unexpected() const {
    if (at_end()) formula_error(text_, pos_, "unexpected end of formula");
    formula_error(text_, pos_, fmt::format("unexpected character '{}'", text_[pos_]));
  }

  bool accept(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  void expect(char c) {
    if (!accept(c)) {
      skip_space();
      if (at_end()) formula_error(text_, pos_, fmt::format("expected '{}' before the end", c));
      formula_error(text_, pos_, fmt::format("expected '{}', found '{}'", c, text_[pos_]));
    }
  }

  static NodePtr binary(Kind kind, std::size_t position, NodePtr left, NodePtr right) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->position = position;
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  NodePtr sum() {
    NodePtr left = product();
    for (;;) {
      skip_space();
      std::size_t at = pos_;
      if (accept('+')) {
        left = binary(Kind::add, at, std::move(left), product());
      } else if (accept('-')) {
        left = binary(Kind::subtract, at, std::move(left), product());
      } else {
        return left;
      }
    }
  }

  NodePtr product() {
    NodePtr left = unary();
    for (;;) {
      skip_space();
      std::size_t at = pos_;
      if (accept('*')) {
        left = binary(Kind::multiply, at, std::move(left), unary());
      } else if (accept('/')) {
        left = binary(Kind::divide, at, std::move(left), unary());
      } else {
        return left;
      }
    }
  }

  NodePtr unary() {
    skip_space();
    std::size_t at = pos_;
    if (accept('-')) {
      auto node = std::make_unique<Node>();
      node->kind = Kind::negate;
      node->position = at;
      node->children.push_back(unary());
      return node;
    }
    return primary();
  }

  NodePtr primary() {
    skip_space();
    std::size_t at = pos_;
    char c = peek();
    if (accept('(')) {
      NodePtr inner = sum();
      expect(')');
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::string name = identifier();
      skip_space();
      if (peek() == '(') return call(std::move(name), at);
      auto node = std::make_unique<Node>();
      node->kind = Kind::axis;
      node->position = at;
      node->name = std::move(name);
      return node;
    }
    unexpected();
  }

  std::string identifier() {
    std::size_t start = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // digits [. digits] [e [+-] digits]; at least one digit in the mantissa.
  NodePtr number() {
    std::size_t start = pos_;
    auto digits = [&] {
      std::size_t from = pos_;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
      return pos_ - from;
    };
    std::size_t mantissa = digits();
    if (peek() == '.') {
      ++pos_;
      mantissa += digits();
    }
    if (mantissa == 0) formula_error(text_, start, "a number needs at least one digit");
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) formula_error(text_, pos_, "a number's exponent needs digits");
    }
    if (std::isalpha(static_cast<unsigned char>(peek())) || peek() == '_') unexpected();
    auto node = std::make_unique<Node>();
    node->kind = Kind::number;
    node->position = start;
    // from_chars, not stod: the decimal point must not depend on the locale.
    std::string_view digits_text = text_.substr(start, pos_ - start);
    std::from_chars(digits_text.data(), digits_text.data() + digits_text.size(), node->number);
    return node;
  }

  NodePtr call(std::string name, std::size_t at) {
    if (!is_function(name)) {
      formula_error(text_, at,
                    fmt::format("unknown function '{}' (known: ceil_div, align, min, max)", name));
    }
    expect('(');
    auto node = std::make_unique<Node>();
    node->kind = Kind::call;
    node->position = at;
    node->name = std::move(name);
    skip_space();
    if (peek() != ')') {
      do {
        node->children.push_back(sum());
      } while (accept(','));
    }
    expect(')');
    if (node->children.size() != 2) {
      formula_error(text_, at, fmt::format("{} takes 2 arguments, got {}", node->name,
                                           node->children.size()));
    }
    return node;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

class Evaluator {
 public:
  Evaluator(std::string_view text, const std::map<std::string, int64_t>& axes)
      : text_(text), axes_(axes) {}

  double operator()(const Node& node) const {
    switch (node.kind) {
      case Kind::number:
        return node.number;
      case Kind::axis: {
        auto found = axes_.find(node.name);
        if (found == axes_.end()) formula_error(text_, node.position, fmt::format("unknown axis '{}'", node.name));
        return static_cast<double>(found->second);
      }
      case Kind::negate:
        return -(*this)(*node.children[0]);
      default:
        break;
    }
    double a = (*this)(*node.children[0]);
    double b = (*this)(*node.children[1]);
    switch (node.kind) {
      case Kind::add:
        return a + b;
      case Kind::subtract:
        return a - b;
      case Kind::multiply:
        return a * b;
      case Kind::divide:
        if (b == 0.0) formula_error(text_, node.position, "division by zero");
        return a / b;
      default:
        break;
    }
    if (node.name == "min") return std::min(a, b);
    if (node.name == "max") return std::max(a, b);
    if (b == 0.0) formula_error(text_, node.position, fmt::format("{} by zero", node.name));
    double quotient = std::ceil(a / b);
    return node.name == "ceil_div" ? quotient : quotient * b;
  }

 private:
  std::string_view text_;
  const std::map<std::string, int64_t>& axes_;
};

void collect(const Node& node, std::set<std::string>& names) {
  if (node.kind == Kind::axis) names.insert(node.name);
  for (const auto& child : node.children) collect(*child, names);
}

}  // namespace

double evaluate(std::string_view formula, const std::map<std::string, int64_t>& axes) {
  NodePtr root = Parser(formula).parse();
  return Evaluator(formula, axes)(*root);
}

std::set<std::string> identifiers(std::string_view formula) {
  NodePtr root = Parser(formula).parse();
  std::set<std::string> names;
  collect(*root, names);
  return names;
}

}  // namespace d2k
