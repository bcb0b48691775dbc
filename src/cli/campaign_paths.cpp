#include "cli/campaign_paths.hpp"

#include "core/error.hpp"

namespace d2k {

campaign::CampaignPaths campaign_paths(const std::string& given, const Context& context) {
  namespace fs = std::filesystem;
  const fs::path path(given);
  if (fs::is_regular_file(path) && path.filename() == "campaign.db") return {fs::absolute(path).parent_path()};
  if (fs::is_regular_file(path / "campaign.db")) return {fs::absolute(path)};
  const auto named = context.cache_dir / "campaigns" / given;
  if (given.find('/') == std::string::npos && fs::is_regular_file(named / "campaign.db")) return {named};
  fail("{}: no campaign there (no campaign.db in it, nor in {})", given, named.string());
}

}  // namespace d2k
