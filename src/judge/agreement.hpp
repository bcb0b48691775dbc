// How far the samples of a judgement agree: per item, the share of sample pairs that gave the same verdict
// (Fleiss' P_i); over the items, Fleiss' kappa (agreement beyond what the verdicts' overall shares give by
// chance). A judgement whose samples disagree widely is flagged. docs/judge.md has the formulas.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "judge/verdict.hpp"

namespace d2k::judge {

// The bar: flagged when the mean per-item agreement is below this...
constexpr double kMinMeanAgreement = 0.6;
// ...or when the samples' scores span more than this many points (max - min).
constexpr double kMaxScoreRange = 20.0;

// Fleiss' P_i of one subject: counts[j] raters put it in category j; n = the sum >= 2.
// P_i = (sum_j n_ij^2 - n) / (n (n - 1)).
double subject_agreement(const std::vector<int>& counts);

// Fleiss' kappa over subjects (rows of per-category counts, each row summing to the same n >= 2):
// (P_bar - P_e) / (1 - P_e), P_bar the mean P_i, P_e = sum_j p_j^2, p_j the share of all ratings in
// category j. None when P_e = 1 (every rating in one category: kappa is undefined, agreement is total) or
// when there are fewer than 2 ratings per subject or no subject.
std::optional<double> fleiss_kappa(const std::vector<std::vector<int>>& counts);

struct Agreement {
  std::map<std::string, double> items;  // id -> P_i over the samples' verdicts
  double mean = 1.0;                    // the mean P_i
  std::optional<double> kappa;
  double score_range = 0;               // max - min of the samples' scores
  bool flagged = false;
  std::string why;                      // what crossed the bar, when flagged
};

// verdicts[s] are sample s's verdicts, every item present. With fewer than 2 samples there is nothing to
// compare: agreement 1, no kappa, not flagged.
Agreement agreement_of(const std::vector<std::map<std::string, Verdict>>& verdicts, const std::vector<double>& sample_scores);

}  // namespace d2k::judge
