#include "eval/ncu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace d2k {
namespace {

namespace fs = std::filesystem;

// PATH set to one folder for the test's length, restored after.
class PathIs {
 public:
  explicit PathIs(const fs::path& folder) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", folder.c_str(), 1);
  }
  ~PathIs() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("d2k-test-ncu-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A toolkit-style layout: <install>/bin/ncu reached through a link in another folder on PATH.
TEST(Ncu, FoundOnPathWithItsInstallationReadOnlyAndItsOptions) {
  const auto root = fresh_dir("found");
  fs::create_directories(root / "cuda-13.0/bin");
  fs::create_directories(root / "path");
  { std::ofstream(root / "cuda-13.0/bin/ncu") << "#!/bin/sh\n"; }
  fs::permissions(root / "cuda-13.0/bin/ncu", fs::perms::owner_all);
  fs::create_symlink(root / "cuda-13.0/bin/ncu", root / "path/ncu");
  PathIs path(root / "path");
  const auto wrap = make_ncu_wrap("a.sum,b.pct", 7, root / "report.txt");
  ASSERT_TRUE(wrap);
  EXPECT_EQ(wrap->ncu, root / "path/ncu");
  EXPECT_EQ(wrap->report, root / "report.txt");
  const auto& args = wrap->args;
  auto after = [&](const std::string& option) {
    auto it = std::find(args.begin(), args.end(), option);
    return it != args.end() && it + 1 != args.end() ? *(it + 1) : std::string("(missing)");
  };
  EXPECT_EQ(after("--launch-count"), "7");
  EXPECT_EQ(after("--metrics"), "a.sum,b.pct");
  EXPECT_EQ(after("--clock-control"), "none");  // the GPU's clocks are never locked by a profile
  EXPECT_NE(std::find(args.begin(), args.end(), "--csv"), args.end());
  // The installation the link resolves to, and the link's own folder.
  EXPECT_NE(std::find(wrap->read.begin(), wrap->read.end(), fs::canonical(root / "cuda-13.0")), wrap->read.end());
  EXPECT_NE(std::find(wrap->read.begin(), wrap->read.end(), root / "path"), wrap->read.end());
  fs::remove_all(root);
}

TEST(Ncu, NotOnPathIsNothing) {
  const auto root = fresh_dir("absent");
  PathIs path(root);
  EXPECT_FALSE(find_on_path("ncu"));
  EXPECT_FALSE(make_ncu_wrap("a.sum", 1, root / "report.txt"));
  fs::remove_all(root);
}

// One row per kernel launch and metric; the harness's own kernels (namespace d2k: the L2 flush, the
// digests of outputs) are not the solution's and are left out.
TEST(Ncu, ParsesItsCsvLeavingOutTheHarnessKernels) {
  const std::string csv =
      "==PROF== Connected to process 123 (/usr/bin/d2k-worker)\n"
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\","
      "\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"123\",\"d2k-worker\",\"h\",\"d2k::<unnamed>::read_all(const uint4 *, unsigned long, unsigned int *)\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"ns\",\"9000\"\n"
      "\"2\",\"123\",\"d2k-worker\",\"h\",\"d2k::digest_words(unsigned long, const unsigned char *, unsigned long, unsigned long *)\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"ns\",\"800\"\n"
      "\"1\",\"123\",\"d2k-worker\",\"h\",\"void topk<8>(const float*, float*, int*, int, int)\",\"1\",\"7\",\"(128, 1, 1)\",\"(512, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"ns\",\"12,345\"\n"
      "\"1\",\"123\",\"d2k-worker\",\"h\",\"void topk<8>(const float*, float*, int*, int, int)\",\"1\",\"7\",\"(128, 1, 1)\",\"(512, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"71.5\"\n"
      "\"1\",\"123\",\"d2k-worker\",\"h\",\"void topk<8>(const float*, float*, int*, int, int)\",\"1\",\"7\",\"(128, 1, 1)\",\"(512, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"launch__registers_per_thread\",\"register/thread\",\"40\"\n";
  const auto kernels = parse_ncu_csv(csv, 10);
  ASSERT_EQ(kernels.size(), 1u) << kernels.dump();
  EXPECT_EQ(kernels[0].at("kernel"), "void topk<8>(const float*, float*, int*, int, int)");
  EXPECT_EQ(kernels[0].at("duration_ns"), 12345.0);
  EXPECT_EQ(kernels[0].at("dram_throughput_pct"), 71.5);
  EXPECT_EQ(kernels[0].at("registers_per_thread"), 40.0);
  EXPECT_EQ(kernels[0].at("grid"), "(512, 1, 1)");
  EXPECT_TRUE(parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM\n", 10).empty());
  EXPECT_FALSE(kernels[0].contains("more"));  // nothing asked beside the profile's own metrics

  // Metrics asked for beside them (--profile-metrics): under "more", by their ncu names; others stay out.
  const std::string more = "smsp__issue_active.avg.pct_of_peak_sustained_active";
  const auto with_more = parse_ncu_csv(
      csv + "\"1\",\"123\",\"d2k-worker\",\"h\",\"void topk<8>(const float*, float*, int*, int, int)\",\"1\",\"7\",\"(128, 1, 1)\",\"(512, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"" +
          more + "\",\"%\",\"63.25\"\n",
      10, {more});
  ASSERT_EQ(with_more.size(), 1u);
  EXPECT_EQ(with_more[0].at("more").at(more), 63.25);
  EXPECT_EQ(with_more[0].at("more").size(), 1u);
}

// What --profile-metrics passes to ncu's command line: metric names only.
TEST(Ncu, MetricNamesAreLowerCaseWordsAndDots) {
  EXPECT_TRUE(ncu_metric_name("smsp__issue_active.avg.pct_of_peak_sustained_active"));
  EXPECT_TRUE(ncu_metric_name("sm__inst_executed.sum"));
  EXPECT_FALSE(ncu_metric_name(""));
  EXPECT_FALSE(ncu_metric_name("--set full"));
  EXPECT_FALSE(ncu_metric_name("a,b"));
  EXPECT_FALSE(ncu_metric_name("Duration"));
  EXPECT_FALSE(ncu_metric_name(std::string(201, 'a')));
}

}  // namespace
}  // namespace d2k
