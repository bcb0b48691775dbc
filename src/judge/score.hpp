// The score of a judgement: 100 x the mean of the items' credits (met 1, partly met 0.5, not met 0), overall
// and per level, where an item gets its credit only when every item it depends on is credited at least
// 0.5 itself (so the rule carries down chains of dependencies); the mean over samples. docs/metrics.md.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/guidance.hpp"
#include "judge/verdict.hpp"

namespace d2k::judge {

struct SampleScore {
  double score = 0;                      // 100 x mean effective credit over all items
  std::map<int, double> levels;          // level -> 100 x mean effective credit of its items
  std::map<std::string, double> credit;  // id -> effective credit (after the dependency rule)
};

// One sample's verdicts (every item of the guidance; an item without one counts not met) scored.
SampleScore score_sample(const Guidance& guidance, const std::map<std::string, Verdict>& verdicts);

struct Score {
  double score = 0;                      // the mean of the samples' scores
  std::map<int, double> levels;          // the mean of the samples' level scores
  std::map<std::string, double> credit;  // id -> mean effective credit over the samples
  std::vector<double> samples;           // each sample's score, in sample order
};

// The samples combined; a Score of zeros when there are none.
Score combine(const std::vector<SampleScore>& samples);

}  // namespace d2k::judge
