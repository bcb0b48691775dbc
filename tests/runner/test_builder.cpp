#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.hpp"
#include "runner/builder.hpp"

namespace fs = std::filesystem;
using namespace d2k;

namespace {

class Builder : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / ("d2k-builder-" + std::to_string(::getpid()) + "-" +
                                            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    options_.device = Device::cpu;
    options_.cache_dir = root_ / "cache";
    options_.abi_include_dir = fs::path(D2K_ROOT_DIR) / "include";
    options_.timeout_seconds = 120;
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path write(const std::string& relative, const std::string& text) {
    fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

  // A valid cpp solution whose bytes differ from run to run.
  std::string solution_source() {
    std::random_device seed;
    return "#include \"d2k/solution.h\"\n#include \"scale.hpp\"\n"
           "extern \"C\" int d2k_run(const d2k_call* call) { return kScale * 0 + " +
           std::to_string(seed() % 1000) + " * 0; }\n";
  }

  fs::path root_;
  BuildOptions options_;
};

}  // namespace

TEST_F(Builder, LoadsAFolderAndAFile) {
  write("sol/b.cpp", "");
  write("sol/a.cc", "");
  write("sol/common.hpp", "");
  write("sol/notes.md", "");
  Solution folder = load_solution(root_ / "sol/");
  EXPECT_EQ(folder.name, "sol");
  EXPECT_EQ(folder.language, Language::cpp);
  ASSERT_EQ(folder.sources.size(), 2u);
  EXPECT_EQ(folder.sources[0].filename(), "a.cc");
  EXPECT_EQ(folder.sources[1].filename(), "b.cpp");
  ASSERT_EQ(folder.headers.size(), 1u);
  EXPECT_EQ(folder.headers[0].filename(), "common.hpp");

  Solution file = load_solution(write("k/kernel.cu", ""));
  EXPECT_EQ(file.name, "kernel");
  EXPECT_EQ(file.language, Language::cuda);
  EXPECT_EQ(file.sources.size(), 1u);
}

TEST_F(Builder, RejectsMixedEmptyAndMissingSolutions) {
  write("mixed/a.cu", "");
  write("mixed/b.cpp", "");
  write("empty/readme.md", "");
  write("odd.rs", "");
  for (const char* name : {"mixed", "empty", "missing", "odd.rs"}) {
    try {
      load_solution(root_ / name);
      ADD_FAILURE() << name << " loaded";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
  }
}

TEST_F(Builder, BuildsACppSolutionAndHitsTheCacheTheSecondTime) {
  write("sol/scale.hpp", "constexpr int kScale = 3;\n");
  write("sol/run.cpp", solution_source());
  Solution solution = load_solution(root_ / "sol");

  BuildResult first = build_solution(solution, options_);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(fs::is_regular_file(first.library));
  EXPECT_EQ(first.library, options_.cache_dir / first.hash / "solution.so");
  EXPECT_EQ(first.hash.size(), 64u);
  EXPECT_NE(first.command.find("-shared"), std::string::npos);

  BuildResult second = build_solution(solution, options_);
  ASSERT_TRUE(second.ok) << second.log;
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.hash, first.hash);
  EXPECT_EQ(second.library, first.library);

  // A header is part of the key too.
  write("sol/scale.hpp", "constexpr int kScale = 4;\n");
  BuildResult changed = build_solution(load_solution(root_ / "sol"), options_);
  ASSERT_TRUE(changed.ok) << changed.log;
  EXPECT_FALSE(changed.cached);
  EXPECT_NE(changed.hash, first.hash);

  // Only the entries, no leftover build folders.
  int entries = 0;
  for (const auto& item : fs::directory_iterator(options_.cache_dir)) {
    EXPECT_FALSE(item.path().filename().string().starts_with(".tmp")) << item.path();
    ++entries;
  }
  EXPECT_EQ(entries, 2);
}

TEST_F(Builder, ACompileErrorIsAFailedResultWithTheCompilerMessageAndIsCached) {
  write("bad/run.cpp",
        "#include \"d2k/solution.h\"\nextern \"C\" int d2k_run(const d2k_call* call) {\n"
        "  return undeclared_identifier_d2k;\n}\n");
  Solution solution = load_solution(root_ / "bad");
  BuildResult first = build_solution(solution, options_);
  EXPECT_FALSE(first.ok);
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(first.library.empty());
  EXPECT_NE(first.log.find("undeclared_identifier_d2k"), std::string::npos) << first.log;
  EXPECT_NE(first.log.find("exited with code"), std::string::npos) << first.log;

  BuildResult second = build_solution(solution, options_);
  EXPECT_FALSE(second.ok);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.log, first.log);
}

TEST_F(Builder, TheCompilerSeesOnlyTheSolutionsFiles) {
  // A file beside the solution folder, which the solution must not reach by a relative include.
  write("secret.hpp", "constexpr int kSecret = 1;\n");
  write("sneaky/run.cpp",
        "#include \"../secret.hpp\"\n#include \"d2k/solution.h\"\n"
        "extern \"C\" int d2k_run(const d2k_call*) { return kSecret; }\n");
  BuildResult result = build_solution(load_solution(root_ / "sneaky"), options_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.log.find("secret.hpp"), std::string::npos) << result.log;
}

TEST_F(Builder, ACudaSolutionIsRejectedOnTheCpuDevice) {
  write("gpu/kernel.cu", "__global__ void k() {}\n");
  BuildResult result = build_solution(load_solution(root_ / "gpu"), options_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.log.find("cuda"), std::string::npos) << result.log;
  EXPECT_NE(result.log.find("cpu"), std::string::npos) << result.log;
  EXPECT_FALSE(fs::exists(options_.cache_dir));
}

TEST_F(Builder, TheCudaCommandNamesTheArchitecture) {
  write("gpu/kernel.cu", "__global__ void k() {}\n");
  options_.device = Device::cpu;
  options_.cuda_arch = "sm_100a";
  BuildResult result = build_solution(load_solution(root_ / "gpu"), options_);
  EXPECT_NE(result.command.find("-gencode=arch=compute_100a,code=sm_100a"), std::string::npos)
      << result.command;
  EXPECT_NE(result.command.find("-lineinfo"), std::string::npos) << result.command;
}

TEST_F(Builder, AMissingCompilerIsAFailureThatIsNotCached) {
  write("sol/scale.hpp", "constexpr int kScale = 3;\n");
  write("sol/run.cpp", solution_source());
  options_.cxx = "d2k-no-such-compiler";
  BuildResult result = build_solution(load_solution(root_ / "sol"), options_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.log.find("d2k-no-such-compiler"), std::string::npos) << result.log;
  EXPECT_FALSE(fs::exists(options_.cache_dir / result.hash));
}

// The CUTLASS headers: a cuda solution's command names them as a system include, a cpp solution's does not,
// and their release is part of the cache key (a compiler that is missing still gives the key).
TEST_F(Builder, ACudaSolutionSeesTheCutlassHeadersAndTheirReleaseIsInTheKey) {
  write("cutlass/include/cute/layout.hpp", "");
  write("cutlass/include/cutlass/version.h", "#define CUTLASS_MINOR 2\n");
  options_.cutlass_include_dir = root_ / "cutlass/include";
  write("gpu/kernel.cu", "__global__ void k() {}\n");
  write("cpp/run.cpp", "int x;\n");
  options_.device = Device::cuda;
  options_.nvcc = "d2k-no-such-compiler";
  BuildResult cuda = build_solution(load_solution(root_ / "gpu"), options_);
  EXPECT_NE(cuda.command.find("-isystem " + (root_ / "cutlass/include").string()), std::string::npos) << cuda.command;
  write("cutlass/include/cutlass/version.h", "#define CUTLASS_MINOR 3\n");
  EXPECT_NE(build_solution(load_solution(root_ / "gpu"), options_).hash, cuda.hash);

  options_.device = Device::cpu;
  BuildResult cpp = build_solution(load_solution(root_ / "cpp"), options_);
  EXPECT_TRUE(cpp.ok) << cpp.log;
  EXPECT_EQ(cpp.command.find("cutlass"), std::string::npos) << cpp.command;
}

TEST_F(Builder, FindsTheCutlassHeadersOnlyWhereInstalled) {
  ::unsetenv("D2K_CUTLASS_DIR");
  EXPECT_EQ(cutlass_include_dir(root_), fs::path());
  write(".deps/cutlass/include/cute/layout.hpp", "");
  EXPECT_EQ(cutlass_include_dir(root_), fs::path());  // cute/ without cutlass/: not an install
  write(".deps/cutlass/include/cutlass/version.h", "");
  EXPECT_EQ(cutlass_include_dir(root_), fs::canonical(root_ / ".deps/cutlass/include"));
  write("elsewhere/cute/layout.hpp", "");
  write("elsewhere/cutlass/version.h", "");
  ::setenv("D2K_CUTLASS_DIR", (root_ / "elsewhere").c_str(), 1);
  EXPECT_EQ(cutlass_include_dir(root_), fs::canonical(root_ / "elsewhere"));
  ::unsetenv("D2K_CUTLASS_DIR");
}
