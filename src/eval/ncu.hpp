// Nsight Compute around the worker (EvalOptions::ncu): found on PATH, run inside the worker's sandbox
// with its installation visible read-only. Measured on the H200 (docs/results/2026-11-30-h200-integrity.md):
// ncu outside the sandbox does not reach a sandboxed worker, ncu inside it does.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/evaluator.hpp"

namespace d2k {

// The first executable `name` in the folders of $PATH.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// ncu with `metrics` (comma-separated) for the first `launch_count` kernels, its report to `report`;
// nothing when ncu is not on PATH.
std::optional<NcuWrap> make_ncu_wrap(const std::string& metrics, int launch_count, const std::filesystem::path& report);

// The metrics a profile reads, comma-separated for make_ncu_wrap: duration, SM, memory and DRAM
// throughput (% of peak), DRAM bytes, achieved occupancy, registers, static and dynamic shared memory.
std::string ncu_profile_metrics();

// The first `max_kernels` kernels of `ncu --csv --print-units base --metrics ...` output, each an object
// with kernel, grid, block and the metrics under short names (duration_ns, dram_bytes, ...). The
// harness's own kernels in the worker (namespace d2k: the L2 flush, the digests of outputs, the swaps
// of patched elements) are left out. The metrics named in `more` (asked for beside the profile's own:
// `d2k eval --profile --profile-metrics`) go under "more", by their ncu names.
nlohmann::json parse_ncu_csv(const std::string& output, std::size_t max_kernels, const std::vector<std::string>& more = {});

// A metric name Nsight Compute could know: lower-case letters, digits, '_' and '.', at most 200 characters
// (what `--profile-metrics` accepts, so that nothing else reaches ncu's command line).
bool ncu_metric_name(const std::string& name);

}  // namespace d2k
