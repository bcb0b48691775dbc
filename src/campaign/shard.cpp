#include "campaign/shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <regex>

#include "core/error.hpp"
#include "core/splitmix.hpp"

namespace d2k::campaign {

namespace fs = std::filesystem;

Shard parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  Shard shard;
  const auto number = [](std::string_view s, int& out) {
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && error == std::errc() && end == s.data() + s.size();
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), shard.index) ||
      !number(text.substr(slash + 1), shard.count) || shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    fail("--shard {}: must be I/N, shard I (from 0) of N shards, 0 <= I < N", text);
  return shard;
}

std::string name_of(const Shard& shard) {
  return shard.whole() ? "the whole campaign" : fmt::format("shard {} of {}", shard.index, shard.count);
}

std::vector<int> deal(const std::vector<std::string>& keys, int count) {
  std::vector<std::pair<uint64_t, std::size_t>> order;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a, then splitmix: a fixed order that mixes the plan's axes
    for (unsigned char c : keys[i]) h = (h ^ c) * 1099511628211ull;
    order.emplace_back(splitmix_finalize(h), i);
  }
  std::sort(order.begin(), order.end());
  std::vector<int> out(keys.size());
  for (std::size_t rank = 0; rank < order.size(); ++rank)
    out[order[rank].second] = static_cast<int>(rank % static_cast<std::size_t>(count));
  return out;
}

std::vector<PlannedRun> shard_runs(const std::vector<PlannedRun>& runs, const Shard& shard) {
  if (shard.whole()) return runs;
  std::vector<std::string> keys;
  for (const auto& r : runs) keys.push_back(r.key);
  const auto dealt = deal(keys, shard.count);
  std::vector<PlannedRun> out;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (dealt[i] == shard.index) out.push_back(runs[i]);
  return out;
}

std::vector<std::string> shard_experts(const std::vector<std::string>& tasks, const Shard& shard) {
  if (shard.whole()) return tasks;
  const auto dealt = deal(tasks, shard.count);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (dealt[i] == shard.index) out.push_back(tasks[i]);
  return out;
}

fs::path shard_store(const fs::path& dir, const Shard& shard) {
  return dir / fmt::format("campaign.shard-{}-of-{}.db", shard.index, shard.count);
}

fs::path shard_lock(const fs::path& dir, const Shard& shard) {
  return dir / fmt::format("campaign.shard-{}-of-{}.lock", shard.index, shard.count);
}

std::vector<ShardFile> find_shard_stores(const fs::path& dir) {
  static const std::regex name(R"(campaign\.shard-(\d+)-of-(\d+)\.db)");
  std::vector<ShardFile> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::smatch m;
    const auto file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    Shard shard{std::stoi(m[1]), std::stoi(m[2])};
    if (shard.count < 1 || shard.index >= shard.count) continue;
    out.push_back({shard, entry.path()});
  }
  std::sort(out.begin(), out.end(), [](const ShardFile& a, const ShardFile& b) {
    return std::pair(a.shard.count, a.shard.index) < std::pair(b.shard.count, b.shard.index);
  });
  for (const auto& f : out)
    if (f.shard.count != out.front().shard.count)
      fail("{}: shard stores of {} and of {} shards ({} and {}): a run's shard depends on the count, so the stores of "
           "one campaign must all have one count; move the stray ones away",
           dir.string(), out.front().shard.count, f.shard.count, out.front().file.filename().string(),
           f.file.filename().string());
  return out;
}

}  // namespace d2k::campaign
