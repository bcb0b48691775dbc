// The eval environment's pieces, each on its own: the device named, the worker found, the sandbox mode
// read, the ceilings read from the cache (so `d2k ceilings` needs no worker and no sandbox).
#include "eval/environment.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "core/error.hpp"
#include "core/json.hpp"
#include "timing/ceilings.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

// A fresh empty folder, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : path_(fs::temp_directory_path() / fmt::format("d2k-test-env-{}-{}", name, ::getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Environment, ResolvesANamedDevice) {
  EXPECT_EQ(resolve_device({.device = "cpu"}), Device::cpu);
  EXPECT_EQ(error_of([] { resolve_device({.device = "gpu"}); }), "--device: unknown device 'gpu' (auto, cuda or cpu)");
}

TEST(Environment, FindsTheWorkerInTheBinFolderOrNamesThePathItLookedAt) {
  const fs::path worker = D2K_WORKER_PATH;
  EXPECT_EQ(find_worker({.bin_dir = worker.parent_path()}), worker);
  TempDir empty("worker");
  EXPECT_EQ(error_of([&] { find_worker({.bin_dir = empty.path()}); }),
            "the worker executable is missing: " + (empty.path() / "d2k-worker").string());
}

TEST(Environment, SandboxOffRunsNothingAndSaysSo) {
  std::ostringstream log;
  TempDir empty("sandbox");  // no launcher in it: off must not need one
  const auto sandbox = probe_sandbox(Device::cpu, {.sandbox = "off", .bin_dir = empty.path(), .log = &log});
  EXPECT_EQ(sandbox.mode, SandboxMode::off);
  EXPECT_NE(log.str().find("sandbox off"), std::string::npos) << log.str();
  EXPECT_EQ(error_of([&] { probe_sandbox(Device::cpu, {.sandbox = "paranoid", .bin_dir = empty.path()}); }),
            "--sandbox: unknown mode 'paranoid' (strict, best-effort or off)");
  EXPECT_EQ(error_of([&] { probe_sandbox(Device::cpu, {.sandbox = "strict", .bin_dir = empty.path()}); }),
            "the sandbox launcher is missing: " + (empty.path() / "d2k-sandbox").string());
}

TEST(Environment, CeilingsComeFromTheCacheWithoutMeasuring) {
  TempDir cache("ceilings");
  Ceilings cached{.device_name = "test cpu", .copy_gbps = 12.5, .fp8_config = "none"};
  std::ofstream(ceilings_file(Device::cpu, cache.path())) << nlohmann::json(cached).dump();
  std::ostringstream log;
  const auto ceilings = device_ceilings(Device::cpu, {.cache_dir = cache.path(), .log = &log});
  EXPECT_DOUBLE_EQ(ceilings.copy_gbps, 12.5);
  EXPECT_EQ(ceilings.device_name, "test cpu");
  EXPECT_EQ(log.str(), "");  // measuring would have said so
}

TEST(Environment, MakesTheWholeEnvironmentFromItsOptions) {
  TempDir cache("whole");
  std::ofstream(ceilings_file(Device::cpu, cache.path())) << nlohmann::json(Ceilings{.copy_gbps = 7.0, .fp8_config = "none"}).dump();
  const fs::path worker = D2K_WORKER_PATH;
  const auto environment = make_environment(
      {.device = "cpu", .sandbox = "off", .root = "/d2k", .cache_dir = cache.path(), .bin_dir = worker.parent_path()});
  EXPECT_EQ(environment.device, Device::cpu);
  EXPECT_FALSE(environment.device_name.empty());
  EXPECT_DOUBLE_EQ(environment.ceilings.copy_gbps, 7.0);
  EXPECT_EQ(environment.root, "/d2k");
  EXPECT_EQ(environment.build_cache, cache.path() / "builds");
  EXPECT_TRUE(fs::is_directory(cache.path() / "scratch"));
  EXPECT_EQ(environment.worker, worker);
  ASSERT_TRUE(environment.sandbox);
  EXPECT_EQ(environment.sandbox->mode, SandboxMode::off);
}

}  // namespace
}  // namespace d2k
