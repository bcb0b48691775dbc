// A campaign named on the command line: its folder, its campaign.db, or its name under
// <cache>/campaigns/. An error names what was given and where it looked.
#pragma once

#include <string>

#include "campaign/runner.hpp"
#include "cli/context.hpp"

namespace d2k {

campaign::CampaignPaths campaign_paths(const std::string& given, const Context& context);

}  // namespace d2k
