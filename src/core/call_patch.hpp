// The patch of one timed call. Before each timed call the worker swaps a few pairs of elements of every
// perturbable input (WireTensor::perturb), each pair within one row (the last dimension), so that no two
// timed calls see the same inputs and none sees the checked call's: a solution that replays an earlier
// call's outputs, or caches them by any key short of every input byte, answers the wrong inputs. A swap
// keeps the values and each row's multiset of values (so a row of probabilities still sums to one), and
// the orchestrator can rebuild any call's inputs from the first draw to check that call's outputs.
//
// An input may instead be relabelled (task.toml `relabel`, WireTensor::relabel): pairs of positions of its
// last dimension, each pair within one block of `relabel` consecutive positions, swap in every row, and
// every relabelled input with the same column count and block gets the same pairs. That is a symmetry of
// an op whose last dimension names things in groups (experts in routing groups): the answer moves with
// the labels and every spacing between values, within a row and across inputs, is kept, where a swap of
// two elements of one row would pair a value with another input's element it was never drawn beside.
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

// Up to `swaps` swaps per perturbable input (relabelled inputs: as many column pairs as keep the input's
// element swaps within kMostRelabelSwaps, at least `swaps`) (fewer for a tensor with few elements), the elements of one
// call's patch all distinct within an input, so applying the swaps in any order gives the same result
// and applying them twice restores the inputs. Ordered by input.
inline constexpr int64_t kMostRelabelSwaps = 1 << 16;

std::vector<ElementSwap> call_patch(uint64_t seed, int64_t call, const std::vector<WireTensor>& inputs, int swaps);

// Applies the swaps of `input` to its storage (element size `element_bytes`), on the host.
void apply_swaps(const std::vector<ElementSwap>& swaps, int input, void* storage, std::size_t element_bytes);

}  // namespace d2k
