#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "runner/process.hpp"

namespace fs = std::filesystem;
using d2k::ProcessResult;
using d2k::ProcessSpec;
using d2k::run_process;

namespace {

ProcessResult sh(const std::string& script, double timeout = 10, std::size_t cap = 1 << 20) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.timeout_seconds = timeout;
  spec.output_cap = cap;
  return run_process(spec);
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-process-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST(Process, ReportsTheExitCodeAndMergesOutput) {
  ProcessResult result = sh("echo to-stdout; echo to-stderr >&2; exit 3");
  EXPECT_EQ(result.end, ProcessResult::End::exited);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.output, "to-stdout\nto-stderr\n");
  EXPECT_EQ(result.describe(), "exited with code 3");

  ProcessResult fine = sh("true");
  EXPECT_TRUE(fine.ok());
  EXPECT_EQ(fine.output, "");
}

TEST(Process, ReportsTheSignal) {
  ProcessResult result = sh("kill -SEGV $$");
  EXPECT_EQ(result.end, ProcessResult::End::signaled);
  EXPECT_EQ(result.signal, SIGSEGV);
  EXPECT_EQ(result.describe(), "killed by signal 11 (SIGSEGV)");
}

TEST(Process, TimeoutKillsTheWholeGroupIncludingAGrandchild) {
  fs::path dir = fresh_dir("timeout");
  fs::path pid_file = dir / "grandchild.pid";
  auto begin = std::chrono::steady_clock::now();
  ProcessResult result = sh("sleep 30 & echo $! > '" + pid_file.string() + "'; echo started; wait", 0.5);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(result.end, ProcessResult::End::timed_out);
  EXPECT_EQ(result.describe(), "timed out after 0.5 s");
  EXPECT_EQ(result.output, "started\n");
  EXPECT_LT(seconds, 5.0);

  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild);
  // Gone, or a zombie waiting for init to reap it: either way no longer running.
  bool running = true;
  for (int i = 0; i < 100 && running; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid, comm, state;
    running = static_cast<bool>(stat >> pid >> comm >> state) && state != "Z" && state != "X";
    if (running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(running) << "the sleeping grandchild " << grandchild << " survived the timeout";
  fs::remove_all(dir);
}

TEST(Process, ADaemonLeftInTheGroupDoesNotHoldTheCallerUp) {
  auto begin = std::chrono::steady_clock::now();
  ProcessResult result = sh("sleep 30 & echo parent done", 20);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.output, "parent done\n");
  EXPECT_LT(seconds, 5.0);
}

TEST(Process, CapsOutputKeepingHeadAndTail) {
  fs::path dir = fresh_dir("cap");
  std::mt19937 random(12345);
  std::string text;
  for (int i = 0; i < 200000; ++i) text.push_back(static_cast<char>('a' + random() % 26));
  std::ofstream(dir / "big.txt") << text;

  const std::size_t cap = 1000;
  ProcessResult result = sh("cat '" + (dir / "big.txt").string() + "'", 10, cap);
  ASSERT_TRUE(result.ok());
  std::string marker = "\n[... " + std::to_string(text.size() - cap) + " bytes cut ...]\n";
  EXPECT_EQ(result.output, text.substr(0, cap / 2) + marker + text.substr(text.size() - cap / 2));

  ProcessResult small = sh("cat '" + (dir / "big.txt").string() + "'", 10, text.size());
  EXPECT_EQ(small.output, text);
  fs::remove_all(dir);
}

TEST(Process, RunsInTheGivenFolderWithTheGivenEnvironment) {
  fs::path dir = fresh_dir("cwd");
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "pwd; echo \"$D2K_TEST_VALUE\""};
  spec.cwd = dir;
  spec.env = {{"D2K_TEST_VALUE", "forty two"}};
  ProcessResult result = run_process(spec);
  ASSERT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.output, fs::canonical(dir).string() + "\nforty two\n");
  fs::remove_all(dir);
}

TEST(Process, AMissingProgramFailsToStart) {
  ProcessSpec spec;
  spec.argv = {"d2k-no-such-program-anywhere"};
  ProcessResult result = run_process(spec);
  EXPECT_EQ(result.end, ProcessResult::End::failed_to_start);
  EXPECT_NE(result.describe().find("d2k-no-such-program-anywhere"), std::string::npos);

  spec.argv = {"/nonexistent/d2k-program"};
  EXPECT_EQ(run_process(spec).end, ProcessResult::End::failed_to_start);
}

// stdin_data reaches the child whole, then end of file; without it stdin is /dev/null, at once at its end.
TEST(Process, FeedsStdinThenEndOfFile) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "cat; echo end"};
  spec.stdin_data = "a secret\nof two lines\n";
  ProcessResult result = run_process(spec);
  ASSERT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.output, "a secret\nof two lines\nend\n");

  spec.stdin_data.clear();
  result = run_process(spec);
  EXPECT_EQ(result.output, "end\n");

  // More than a pipe's default 64 KiB, so that the pipe is grown to hold it.
  std::mt19937 random(7);
  std::string big;
  for (int i = 0; i < 300000; ++i) big.push_back(static_cast<char>('a' + random() % 26));
  spec.argv = {"wc", "-c"};
  spec.stdin_data = big;
  result = run_process(spec);
  ASSERT_TRUE(result.ok()) << result.describe() << "\n" << result.output;
  EXPECT_EQ(result.output, "300000\n");
}

// The bytes are in the pipe before the child starts: a child that never reads them neither hangs the
// caller nor kills it with SIGPIPE, and one that closes its stdin sees nothing more of them.
TEST(Process, StdinTheChildDoesNotReadCostsNothing) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "exec 0<&-; echo closed"};
  spec.stdin_data = "unread";
  spec.timeout_seconds = 10;
  ProcessResult result = run_process(spec);
  ASSERT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.output, "closed\n");
  EXPECT_LT(result.seconds, 5.0);
}

TEST(Process, StdinLargerThanAPipeHoldsFailsToStart) {
  ProcessSpec spec;
  spec.argv = {"cat"};
  spec.stdin_data = std::string((1 << 20) + 1, 'x');
  ProcessResult result = run_process(spec);
  EXPECT_EQ(result.end, ProcessResult::End::failed_to_start);
  EXPECT_NE(result.output.find("stdin of 1048577 bytes"), std::string::npos) << result.output;
}
