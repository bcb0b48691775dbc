// The progress observers: the JSON-lines one writes one parseable object per event and line, the text
// one a line per event for people (the silent one is driven by tests/e2e/progress_cpu.sh).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "eval/jsonl_observer.hpp"
#include "eval/text_observer.hpp"

namespace d2k {
namespace {

using nlohmann::json;

struct Events {
  Task task{.name = "norm/demo"};
  Workload workload{.name = "llama-T7"};
  Solution solution{.name = "my_kernel"};
  BuildResult build{.ok = true, .cached = true, .seconds = 1.5};
  Trace trace{.task = "norm/demo", .workload = "llama-T7", .solution = "my_kernel",
              .status = Status::incorrect_numerics, .message = "nmse 0.3 above 1e-5",
              .phases = {{"inputs", 0.5}, {"worker", 2.75}}};

  // Every event an evaluation of one workload reports, in order.
  void play(EvalObserver& observer) const {
    observer.run_started(2, 3, 42);
    observer.building(task, solution);
    observer.built(task, build);
    observer.step({task, workload, 1, 2, 0.3}, "oracle");
    observer.finished({task, workload, 1, 2, 3.5}, trace);
  }
};

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(JsonLinesObserver, OneObjectPerEventAndLine) {
  std::ostringstream out;
  JsonLinesObserver observer(out);
  Events().play(observer);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_EQ(lines[0], (json{{"event", "run"}, {"run", 2}, {"runs", 3}, {"seed", 42}}));
  EXPECT_EQ(lines[1], (json{{"event", "building"}, {"task", "norm/demo"}, {"solution", "my_kernel"}}));
  EXPECT_EQ(lines[2], (json{{"event", "built"}, {"task", "norm/demo"}, {"ok", true}, {"seconds", 1.5}, {"cached", true}}));
  EXPECT_EQ(lines[3], (json{{"event", "step"}, {"task", "norm/demo"}, {"workload", "llama-T7"}, {"index", 1},
                            {"count", 2}, {"elapsed_seconds", 0.3}, {"step", "oracle"}}));
  EXPECT_EQ(lines[4], (json{{"event", "finished"}, {"task", "norm/demo"}, {"workload", "llama-T7"}, {"index", 1},
                            {"count", 2}, {"elapsed_seconds", 3.5}, {"status", "incorrect_numerics"},
                            {"message", "nmse 0.3 above 1e-5"}, {"solution", "my_kernel"}, {"seed", 42},
                            {"phases", json::array({{{"name", "inputs"}, {"seconds", 0.5}}, {{"name", "worker"}, {"seconds", 2.75}}})}}));
}

// A ledger of seeds reads the finished lines alone (a run cut short writes no --json document): each
// names the run's seed and, when the solution was timed, its median.
TEST(JsonLinesObserver, FinishedLinesCarryTheRunsSeedAndTheMedian) {
  std::ostringstream out;
  JsonLinesObserver observer(out);
  Events events;
  events.trace.status = Status::passed;
  events.trace.performance = Performance{.solution = TimingSummary{.median_ms = 0.0182}};
  observer.finished({events.task, events.workload, 1, 1, 0.0}, events.trace);  // before any run: no seed
  observer.run_started(1, 1, 7);
  observer.finished({events.task, events.workload, 1, 1, 0.0}, events.trace);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_FALSE(lines[0].contains("seed"));
  EXPECT_EQ(lines[2]["seed"], 7);
  EXPECT_EQ(lines[2]["median_ms"], 0.0182);
  EXPECT_EQ(lines[2]["solution"], "my_kernel");
}

TEST(JsonLinesObserver, InvalidUtf8InAMessageStillMakesALine) {
  std::ostringstream out;
  JsonLinesObserver observer(out);
  Events events;
  events.trace.message = "compiler said \xff\xfe";
  observer.finished({events.task, events.workload, 1, 1, 0.0}, events.trace);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["status"], "incorrect_numerics");
}

TEST(TextObserver, ALinePerEventForPeople) {
  std::ostringstream out;
  TextObserver observer(out);
  Events().play(observer);
  EXPECT_EQ(out.str(),
            "d2k: run 2 of 3 (seed 42)\n"
            "norm/demo: building my_kernel\n"
            "norm/demo: build ok in 1.5 s (cached)\n"
            "[1/2] norm/demo llama-T7: oracle (at 0.3 s)\n"
            "[1/2] norm/demo llama-T7: incorrect_numerics in 3.5 s\n");
}

TEST(TextObserver, ASingleRunSaysNothingOfItsSeed) {
  std::ostringstream out;
  TextObserver observer(out);
  observer.run_started(1, 1, 7);
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace d2k
