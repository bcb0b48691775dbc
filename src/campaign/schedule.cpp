#include "campaign/schedule.hpp"

#include "core/error.hpp"

namespace d2k::campaign {

void Schedule::add(const std::string& key, const std::string& endpoint) {
  if (endpoint_of_.count(key)) fail("schedule: run {} added twice", key);
  endpoint_of_[key] = endpoint;
  queue_.emplace_back(key, endpoint);
}

std::optional<std::string> Schedule::next() {
  if (running_ >= total_) return std::nullopt;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (busy_[it->second] >= per_endpoint_) continue;
    ++busy_[it->second];
    ++running_;
    auto key = it->first;
    queue_.erase(it);
    return key;
  }
  return std::nullopt;
}

void Schedule::done(const std::string& key) {
  const auto it = endpoint_of_.find(key);
  if (it == endpoint_of_.end()) fail("schedule: run {} was never added", key);
  --busy_[it->second];
  --running_;
}

int Schedule::running_on(const std::string& endpoint) const {
  const auto it = busy_.find(endpoint);
  return it == busy_.end() ? 0 : it->second;
}

}  // namespace d2k::campaign
