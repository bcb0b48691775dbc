// Nsight Compute around the worker (EvalOptions::ncu): found on PATH, run inside the worker's sandbox
// with its installation visible read-only. Measured on the H200 (docs/results/2026-11-30-h200-integrity.md):
// ncu outside the sandbox does not reach a sandboxed worker, ncu inside it does.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "eval/evaluator.hpp"

namespace d2k {

// The first executable `name` in the folders of $PATH.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// ncu with `metrics` (comma-separated) for the first `launch_count` kernels, its report to `report`;
// nothing when ncu is not on PATH.
std::optional<NcuWrap> make_ncu_wrap(const std::string& metrics, int launch_count, const std::filesystem::path& report);

}  // namespace d2k
