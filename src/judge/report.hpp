// Printers of judgements for people: they read a Judgement and write; they never ask or score anything.
#pragma once

#include <ostream>

#include "core/task.hpp"
#include "judge/judge.hpp"

namespace d2k::judge {

// One row per item (its verdict in each sample, its mean credit after the dependency rule, the samples'
// agreement on it), then the score overall and per level, the samples' scores, agreement and kappa, the
// audit (code), every flag, tokens and cost, and where the score document is.
void print_judgement(std::ostream& out, const Task& task, Kind kind, const Judgement& judgement, const std::string& model,
                     const std::string& score_file);

}  // namespace d2k::judge
