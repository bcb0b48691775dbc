// Which run starts next: runs wait for a free slot of their model's endpoint (a concurrency limit per
// base_url, shared by the models of one endpoint) and of the campaign as a whole. GPU work is not
// scheduled here: the runs' evaluations take the device's lock (device_locks.hpp) when they need it.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>

namespace d2k::campaign {

class Schedule {
 public:
  Schedule(int total_limit, int per_endpoint_limit) : total_(total_limit), per_endpoint_(per_endpoint_limit) {}

  void add(const std::string& key, const std::string& endpoint);  // in the order runs should start
  // The first waiting run whose endpoint has a free slot, taken (running); nothing when every waiting
  // run's endpoint is full or the campaign's limit is reached.
  std::optional<std::string> next();
  void done(const std::string& key);

  int running() const { return running_; }
  std::size_t waiting() const { return queue_.size(); }
  int running_on(const std::string& endpoint) const;

 private:
  int total_, per_endpoint_;
  int running_ = 0;
  std::deque<std::pair<std::string, std::string>> queue_;  // key, endpoint
  std::map<std::string, std::string> endpoint_of_;
  std::map<std::string, int> busy_;
};

}  // namespace d2k::campaign
