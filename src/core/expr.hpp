// The formula language of task.toml (shapes, strides, FLOPs, minimum bytes): numbers, axis names,
// + - * / (exact real division), unary minus, parentheses, and ceil_div(a, b), align(a, b) (a rounded
// up to a multiple of b), min(a, b), max(a, b).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace d2k {

// Evaluates a formula with the given axis values. Throws d2k::Error naming the formula, the position
// (0-based character offset) and the problem: a syntax error, an unknown axis, a division by zero.
double evaluate(std::string_view formula, const std::map<std::string, int64_t>& axes);

// The axis names a formula uses, without evaluating it; throws d2k::Error on a syntax error. Lets the
// task loader check formulas against the declared axes before any workload gives them values.
std::set<std::string> identifiers(std::string_view formula);

}  // namespace d2k
