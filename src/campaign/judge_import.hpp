// The judge's score files (docs/judge.md: `d2k judge design|code <run folder>` writes
// <run folder>/judge/<kind>-<model>.json) into the store's judge_score table, so that `d2k report` puts the
// design and implementation scores beside performance. Complete judgements only; idempotent.
#pragma once

#include "campaign/store.hpp"

namespace d2k::campaign {

// Returns the scores imported (or refreshed). A score file that is not JSON or lacks a field is skipped
// with a line on `warnings` naming it.
int import_judge_scores(Store& store, std::vector<std::string>* warnings = nullptr);

}  // namespace d2k::campaign
