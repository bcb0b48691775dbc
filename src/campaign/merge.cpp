#include "campaign/merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/timestamp.hpp"

namespace d2k::campaign {

namespace fs = std::filesystem;

MergeResult merge_shards(const fs::path& target, const std::vector<fs::path>& stores) {
  MergeResult result;
  result.target = fs::absolute(target);
  if (stores.empty()) fail("{}: no shard stores to merge", result.target.string());
  std::vector<StoreContents> shards;
  std::set<fs::path> seen;
  const StoreContents* first = nullptr;
  for (const auto& given : stores) {
    std::error_code error;
    if (!fs::is_regular_file(given, error)) fail("{}: no such shard store", given.string());
    const auto file = fs::weakly_canonical(given);
    if (!seen.insert(file).second) continue;  // named twice
    if (file == fs::weakly_canonical(result.target))
      fail("{}: the merged store itself, not a shard store", given.string());
    auto contents = Store(file).contents();
    if (!contents.shard)
      fail("{}: not a shard store (it records no shard of a plan): a campaign run on one machine, or a merged store",
           file.string());
    if (!contents.campaign) {
      result.empty.push_back({*contents.shard, file});
      continue;
    }
    shards.push_back(std::move(contents));
  }
  for (const auto& s : shards) {
    if (!first) {
      first = &s;
      continue;
    }
    const auto& a = *first->campaign;
    const auto& b = *s.campaign;
    if (b.plan_toml != a.plan_toml)
      fail("{}: a shard of campaign '{}' planned with {}, and {} one of campaign '{}' planned with {}{}: shards of "
           "different plans cannot be merged",
           s.file, b.name, b.plan_file, first->file, a.name, a.plan_file,
           a.name == b.name ? " (the same name, another plan text)" : "");
    if (s.shard->count != first->shard->count)
      fail("{}: {}, and {} is {}: the stores of one submission all have one shard count", s.file, name_of(*s.shard),
           first->file, name_of(*first->shard));
    if (b.device != a.device)
      fail("{}: ran on the {} device, {} on the {} device", s.file, b.device, first->file, a.device);
    if (b.language != a.language)
      fail("{}: ran in the {} language, {} in the {} language", s.file, b.language, first->file, a.language);
  }
  for (const auto& e : result.empty)
    if (first && e.shard.count != first->shard->count)
      fail("{}: {}, and {} is {}: the stores of one submission all have one shard count", e.file.string(),
           name_of(e.shard), first->file, name_of(*first->shard));
  if (!first)
    fail("{}: none of the {} shard store(s) holds a campaign yet (their shards stopped before recording the plan)",
         result.target.string(), result.empty.size());
  // Two stores of one shard: the same runs from two places, which cannot both be right.
  std::map<int, std::string> by_index;
  for (const auto& s : shards)
    if (const auto [it, added] = by_index.emplace(s.shard->index, s.file); !added)
      fail("{}: {}, as {} is: two stores of one shard; keep one", s.file, name_of(*s.shard), it->second);

  const auto plan = parse_plan(first->campaign->plan_toml, first->campaign->plan_file);
  const auto runs = plan.runs();
  result.shards = first->shard->count;
  for (const auto& s : shards) {
    std::set<std::string> want;
    for (const auto& r : shard_runs(runs, *s.shard)) want.insert(r.key);
    for (const auto& r : s.runs)
      if (!want.count(r.plan.key))
        fail("{}: {} holds run {}, which is not one of its runs (runs are dealt to shards by a hash of their key, "
             "shard.hpp): written by another d2k's sharding",
             s.file, name_of(*s.shard), r.plan.key);
    if (s.runs.size() != want.size())
      fail("{}: {} holds {} of its {} runs: not a store d2k campaign run --shard wrote", s.file, name_of(*s.shard),
           s.runs.size(), want.size());
  }

  CampaignInfo info = *first->campaign;
  std::vector<std::string> names;
  for (const auto& s : shards) {
    info.created = std::min(info.created, s.campaign->created);
    if (std::find(names.begin(), names.end(), s.campaign->device_name) == names.end())
      names.push_back(s.campaign->device_name);
  }
  info.device_name = fmt::format("{}", fmt::join(names, " | "));

  Store store(result.target);
  for (const auto& m : store.merged_shards())
    if (m.shard.count != result.shards)
      fail("{}: merged from {} shards before ({}), these stores are of {}: a run's shard depends on the count; merge "
           "them into a new file",
           result.target.string(), m.shard.count, m.file, result.shards);
  std::sort(shards.begin(), shards.end(),
            [](const StoreContents& a, const StoreContents& b) { return a.shard->index < b.shard->index; });
  result.counts = store.absorb(info, runs, shards, utc_timestamp());
  for (const auto& s : shards) result.merged.push_back({*s.shard, s.file});
  std::set<int> present;
  for (const auto& s : shards) present.insert(s.shard->index);
  for (const auto& e : result.empty) present.insert(e.shard.index);
  for (int i = 0; i < result.shards; ++i)
    if (!present.count(i)) result.missing.push_back(i);
  for (const auto& r : store.runs()) {
    ++result.runs;
    result.finished += r.state == RunState::finished;
  }
  for (const auto& s : shards) result.evaluations_left += shard_progress(s.file, plan, *s.shard).evaluations_left;
  return result;
}

ShardProgress shard_progress(const fs::path& file, const Plan& plan, const Shard& shard) {
  ShardProgress p;
  const auto runs = shard_runs(plan.runs(), shard);
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    p.left = static_cast<int>(runs.size() + shard_experts(plan.tasks, shard).size());
    return p;
  }
  Store store(file);
  const auto info = store.campaign();
  if (info && info->plan_toml != plan.text)
    fail("{}: the shard was planned with {} as it was then; {} differs from it. Finished runs belong to the first "
         "plan: give a changed plan another campaign.name",
         file.string(), info->plan_file, plan.file.string());
  if (!info) {
    p.left = static_cast<int>(runs.size() + shard_experts(plan.tasks, shard).size());
    return p;
  }
  p.started = true;
  for (const auto& r : store.runs()) {
    ++p.runs;
    p.finished += r.state == RunState::finished;
    p.failed += r.state == RunState::failed;
    if (r.state != RunState::finished) {
      ++p.left;
    } else if (plan.rerun && r.passed && !r.solution.empty() && r.plan.condition != agent::Condition::design_only &&
               !store.has_evaluation(r.plan.key, EvaluationKind::rerun)) {
      ++p.evaluations_left;
    }
  }
  p.left += static_cast<int>(runs.size()) - p.runs;  // runs not even planned in the store yet
  for (const auto& task : shard_experts(plan.tasks, shard))
    if (!store.has_evaluation("expert/" + task, EvaluationKind::expert)) ++p.evaluations_left;
  p.left += p.evaluations_left;
  return p;
}

}  // namespace d2k::campaign
