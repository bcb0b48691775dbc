// Reading and checking a worker request. Anything wrong here is the orchestrator's mistake, not the
// solution's: it ends the worker with a message instead of a result.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/worker_protocol.hpp"

namespace d2k {

// Elements from the first to one past the last addressable element: 1 + sum((shape_i - 1) *
// stride_i), 0 when any dimension is 0, 1 for a scalar (rank 0).
int64_t span_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
std::size_t span_bytes(const WireTensor& tensor);

// Parses request.json and checks it: ranks within D2K_MAX_RANK, no negative sizes or strides, every
// in-place output matching its input, every input file of the right size. Throws d2k::Error that
// names the file, the tensor and the value.
WorkerRequest load_request(const std::filesystem::path& file);

// The input that an in-place output updates; nullptr when there is none.
const WireTensor* inplace_input(const WorkerRequest& request, const WireTensor& output);
// Whether an in-place output updates this input (so it may change).
bool inplace_output(const WorkerRequest& request, const WireTensor& input);

}  // namespace d2k
