// The order the items are shown in, one per sample: a shuffle drawn from the judgement's seed, different
// for every sample while the items allow it, so that no position effect of the judge model favours an
// item the same way in every sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace d2k::judge {

// `samples` orders of `ids`, from `seed` alone (the same on every machine: splitmix64 and Fisher-Yates).
// A draw equal to an earlier sample's is drawn again while fewer than ids.size()! orders are taken.
std::vector<std::vector<std::string>> sample_orders(const std::vector<std::string>& ids, int samples, uint64_t seed);

}  // namespace d2k::judge
