// Shared by the worker tests: build a solution from solutions/, run d2k-worker on a request and its
// draws through the runner (runner/worker_run.hpp), exactly as the evaluator does.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "runner/builder.hpp"
#include "runner/process.hpp"
#include "runner/worker_run.hpp"

namespace d2k::test {

namespace fs = std::filesystem;

inline fs::path scratch_root() {
  static fs::path root = [] {
    fs::path dir = fs::path(testing::TempDir()) / ("d2k-worker-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
  }();
  return root;
}

// Leaves the scratch folder behind only when something failed, for a person to look at.
class RemoveScratchIfAllPassed : public testing::Environment {
 public:
  void TearDown() override {
    if (testing::UnitTest::GetInstance()->Passed()) fs::remove_all(scratch_root());
  }
};

inline fs::path built(const std::string& file, Device device = Device::cpu) {
  BuildOptions options;
  options.device = device;
  options.cache_dir = scratch_root() / "cache";
  options.abi_include_dir = fs::path(D2K_ROOT_DIR) / "include";
  BuildResult result =
      build_solution(load_solution(fs::path(D2K_TEST_DATA) / "worker/solutions" / file), options);
  EXPECT_TRUE(result.ok) << result.command << "\n" << result.log;
  return result.library;
}

// Host values as the raw bytes the control stream carries, and back.
template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> values_of(std::string_view bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

inline WireTensor tensor(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  return WireTensor{.name = std::move(name), .dtype = dtype, .shape = std::move(shape), .strides = std::move(strides)};
}

// The worker on `request` with these draws (one string of bytes per input), as the evaluator runs it,
// without a sandbox.
inline WorkerOutcome run_worker(WorkerRequest request, const std::vector<std::string>& first,
                                const std::vector<std::string>& second = {}, double timeout = 60,
                                std::function<void()> before_first_clock = {}) {
  WorkerLaunch launch{.worker = D2K_WORKER_PATH,
                      .scratch_dir = scratch_root(),
                      .timeout_seconds = timeout,
                      .before_first_clock = std::move(before_first_clock)};
  request.second_draw = !second.empty();
  const DrawBytes a(first.begin(), first.end()), b(second.begin(), second.end());
  return d2k::run_worker(launch, request, a, b);
}

}  // namespace d2k::test
