// The patch of one timed call. Before each timed call the worker swaps a few pairs of elements of every
// perturbable input (WireTensor::perturb), each pair within one row (the last dimension), so that no two
// timed calls see the same inputs and none sees the checked call's: a solution that replays an earlier
// call's outputs, or caches them by any key short of every input byte, answers the wrong inputs. A swap
// keeps the values and each row's multiset of values (so a row of probabilities still sums to one), and
// the orchestrator can rebuild any call's inputs from the first draw to check that call's outputs.
//
// The patch of call i is a pure function of (seed, i, the inputs' geometry): the worker applies it, the
// orchestrator recomputes it for the calls whose outputs come back.
#pragma once

#include <cstdint>
#include <vector>

#include "core/worker_protocol.hpp"

namespace d2k {

struct ElementSwap {
  int input = 0;  // index into the request's inputs
  int64_t a = 0;  // storage offsets of the two elements, in elements (WireTensor::strides apply)
  int64_t b = 0;
};

// Up to `swaps` swaps per perturbable input (fewer for a tensor with few elements), the elements of one
// call's patch all distinct within an input, so applying the swaps in any order gives the same result
// and applying them twice restores the inputs. Ordered by input.
std::vector<ElementSwap> call_patch(uint64_t seed, int64_t call, const std::vector<WireTensor>& inputs, int swaps);

// Applies the swaps of `input` to its storage (element size `element_bytes`), on the host.
void apply_swaps(const std::vector<ElementSwap>& swaps, int input, void* storage, std::size_t element_bytes);

}  // namespace d2k
