// Shared by the worker tests: build a solution from solutions/, write a request with raw tensor
// files, run d2k-worker through run_process as the orchestrator does, read result.json back.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "runner/builder.hpp"
#include "runner/process.hpp"

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

template <typename T>
void write_raw(const fs::path& file, const std::vector<T>& values) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
}

template <typename T>
std::vector<T> read_raw(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string text = bytes.str();
  std::vector<T> values(text.size() / sizeof(T));
  std::memcpy(values.data(), text.data(), values.size() * sizeof(T));
  return values;
}

// The whole file; empty when there is none.
inline std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline WireTensor tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                         std::vector<int64_t> strides, std::string file) {
  WireTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  t.file = std::move(file);
  return t;
}

struct WorkerRun {
  ProcessResult process;
  std::optional<WorkerResult> result;
  std::string token;  // what the worker was handed on its stdin
};

// In the request's folder, a fresh token on stdin, as the orchestrator runs it (evaluator.cpp).
inline WorkerRun run_worker(const fs::path& dir, const WorkerRequest& request, double timeout = 60) {
  std::ofstream(dir / "request.json") << nlohmann::json(request).dump(2);
  ProcessSpec spec;
  spec.argv = {D2K_WORKER_PATH, (dir / "request.json").string()};
  spec.cwd = dir;
  spec.timeout_seconds = timeout;
  WorkerRun out;
  std::random_device random;
  out.token = fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
  spec.stdin_data = out.token + "\n";
  out.process = run_process(spec);
  if (fs::exists(dir / "result.json")) {
    std::ifstream in(dir / "result.json");
    out.result = nlohmann::json::parse(in).get<WorkerResult>();
  }
  return out;
}

inline fs::path test_dir() {
  fs::path dir = scratch_root() / testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::create_directories(dir);
  return dir;
}

}  // namespace d2k::test
