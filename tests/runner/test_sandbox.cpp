// The sandbox through run_process, on both of its paths: namespaces with a new root (the normal
// one) and Landlock with seccomp (machines without namespaces). Each escape is tried for real and
// each test has an unsandboxed control that shows the escape would work without it.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "runner/builder.hpp"
#include "runner/process.hpp"
#include "runner/sandbox.hpp"

namespace fs = std::filesystem;
using d2k::ProcessResult;
using d2k::ProcessSpec;
using d2k::Sandbox;
using d2k::SandboxMode;

namespace {

std::string random_token() {
  std::random_device random;
  return "d2k-secret-" + std::to_string(random()) + std::to_string(random());
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / ("d2k-sandbox-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A listening TCP socket on the host's loopback; counts the connections that reach it.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t size = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      while (true) {
        int client = ::accept(fd_, nullptr, nullptr);
        if (client < 0) return;
        ++accepted_;
        ::close(client);
      }
    });
  }
  ~Listener() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

class SandboxTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    workspace_ = fresh_dir(std::string(GetParam() ? "ns" : "landlock") + "-work");
    outside_ = fresh_dir(std::string(GetParam() ? "ns" : "landlock") + "-outside");
  }

  Sandbox sandbox(SandboxMode mode = SandboxMode::strict) const {
    Sandbox box;
    box.mode = mode;
    box.launcher = D2K_SANDBOX_PATH;
    box.write = {workspace_};
    box.home = workspace_;
    box.processes = 64;
    box.namespaces = GetParam();
    return box;
  }

  ProcessResult sh(const std::string& script, std::optional<Sandbox> box, double timeout = 20) const {
    ProcessSpec spec;
    spec.argv = {"sh", "-c", script};
    spec.cwd = workspace_;
    spec.timeout_seconds = timeout;
    spec.sandbox = std::move(box);
    return run_process(spec);
  }

  fs::path workspace_, outside_;
};

TEST_P(SandboxTest, SaysWhichSandboxApplied) {
  auto result = sh("true", sandbox());
  ASSERT_TRUE(result.ok()) << result.describe() << "\n" << result.output;
  EXPECT_TRUE(result.output.starts_with("d2k-sandbox: ")) << result.output;
  if (GetParam()) {
    EXPECT_NE(result.output.find("namespaces ("), std::string::npos) << result.output;
  } else {
    EXPECT_NE(result.output.find("landlock abi"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("seccomp"), std::string::npos) << result.output;
  }
}

TEST_P(SandboxTest, HostFilesOutsideThePolicyAreNotReadable) {
  const auto token = random_token();
  { std::ofstream(outside_ / "secret.txt") << token << '\n'; }
  const std::string script = "cat " + (outside_ / "secret.txt").string() + "; cat /etc/passwd /etc/shadow; ls /root";
  auto unsandboxed = sh(script, std::nullopt);
  ASSERT_NE(unsandboxed.output.find(token), std::string::npos) << "control: the file is readable without the sandbox";
  auto result = sh(script, sandbox());
  EXPECT_EQ(result.output.find(token), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("root:"), std::string::npos) << result.output;
  EXPECT_FALSE(result.ok());
}

TEST_P(SandboxTest, WritesOnlyItsWorkspace) {
  const std::string script = "echo inside > inside.txt && echo home > \"$HOME/home.txt\"; "
                             "echo out > " + (outside_ / "escaped.txt").string() + "; echo usr > /usr/d2k-escaped-" +
                             std::to_string(::getpid()) + "; true";
  auto result = sh(script, sandbox());
  ASSERT_TRUE(result.ok()) << result.output;
  EXPECT_EQ(read_text(workspace_ / "inside.txt"), "inside\n");
  EXPECT_EQ(read_text(workspace_ / "home.txt"), "home\n");
  EXPECT_FALSE(fs::exists(outside_ / "escaped.txt")) << result.output;
  EXPECT_FALSE(fs::exists("/usr/d2k-escaped-" + std::to_string(::getpid())));
  fs::remove("/usr/d2k-escaped-" + std::to_string(::getpid()));
}

TEST_P(SandboxTest, CannotConnectToTheHostNetwork) {
  Listener listener;
  const std::string script = "bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(listener.port()) +
                             " && echo CONNECTED'";
  auto control = sh(script, std::nullopt);
  ASSERT_NE(control.output.find("CONNECTED"), std::string::npos) << "control: " << control.output;
  // The listener accepts on its own thread: wait until it has counted the control's connection, or a
  // late count of it would pass for the sandbox's.
  for (int i = 0; i < 200 && listener.accepted() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(listener.accepted(), 1);
  const int before = listener.accepted();
  auto result = sh(script, sandbox());
  EXPECT_EQ(result.output.find("CONNECTED"), std::string::npos) << result.output;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(listener.accepted(), before);
}

TEST_P(SandboxTest, SecretsInTheEnvironmentDoNotReachTheChild) {
  const auto token = random_token();
  ::setenv("D2K_TEST_API_KEY", token.c_str(), 1);
  auto control = sh("env", std::nullopt);
  ASSERT_NE(control.output.find(token), std::string::npos);
  for (auto mode : {SandboxMode::strict, SandboxMode::off}) {
    auto result = sh("env", sandbox(mode));
    EXPECT_EQ(result.output.find(token), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("PATH="), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("HOME=" + workspace_.string()), std::string::npos) << result.output;
  }
  ::unsetenv("D2K_TEST_API_KEY");
}

// The launcher passes its stdin on to the command: how the worker gets its token (evaluator.cpp).
TEST_P(SandboxTest, StdinReachesTheCommand) {
  const auto token = random_token();
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "read -r line; echo \"got $line\""};
  spec.cwd = workspace_;
  spec.stdin_data = token + "\n";
  spec.sandbox = sandbox();
  auto result = run_process(spec);
  ASSERT_TRUE(result.ok()) << result.describe() << "\n" << result.output;
  EXPECT_NE(result.output.find("got " + token), std::string::npos) << result.output;
}

// What the command leaves behind cannot write into the workspace once the command has ended (a
// worker's result.json, rewritten after the worker's last word): under namespaces the launcher's init
// (pid 1) ends with the command and the kernel kills the rest of its pid namespace; without them
// run_process kills the process group, which seccomp keeps every process in.
TEST_P(SandboxTest, ALeftoverProcessCannotWriteAfterTheCommandEnds) {
  // The command waits (1 s at most) until the new session exists, so that the control is no race. The
  // leftovers write 1.5 s after the command's last step (first.txt), not 1.5 s after they started: on a
  // loaded machine (ctest -j16 beside the GPU tests) the command itself took longer than that, and a
  // leftover then wrote before the command had ended.
  const std::string after_the_end = "i=0; while [ ! -e first.txt ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; "
                                    "sleep 1.5; ";
  const std::string script = "setsid sh -c ': > session; " + after_the_end + "echo late > late.txt' & "
                             "(" + after_the_end + "echo late > late-in-group.txt) & "
                             "i=0; while [ ! -e session ] && [ $i -lt 100 ]; do sleep 0.01; i=$((i+1)); done; "
                             "echo first > first.txt";
  auto control = sh(script, std::nullopt);
  ASSERT_TRUE(control.ok()) << control.output;
  // Waited for, not slept on: on a loaded machine (CI runs two tests at once) the leftover's 1.5 s sleep
  // can end well after 2.5 s.
  for (int i = 0; i < 100 && !fs::exists(workspace_ / "late.txt"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(workspace_ / "late.txt")) << "control: a new session outlives the group's kill";
  EXPECT_FALSE(fs::exists(workspace_ / "late-in-group.txt"));
  for (const char* file : {"late.txt", "session", "first.txt"}) fs::remove(workspace_ / file);

  auto result = sh(script, sandbox());
  // Long enough for a leftover that survived to write (1.5 s after first.txt, well before 4 s even loaded).
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  EXPECT_EQ(read_text(workspace_ / "first.txt"), "first\n") << result.output;
  EXPECT_FALSE(fs::exists(workspace_ / "late.txt")) << result.output;
  EXPECT_FALSE(fs::exists(workspace_ / "late-in-group.txt")) << result.output;
}

TEST_P(SandboxTest, OffSaysSo) {
  auto result = sh("echo hi", sandbox(SandboxMode::off));
  EXPECT_TRUE(result.output.starts_with("d2k: sandbox off")) << result.output;
}

// Marks the sleeps of one test so that leftovers can be found in /proc.
bool process_with_argument(const std::string& argument) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string cmdline = read_text(entry.path() / "cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(argument) != std::string::npos && cmdline.find("sleep") != std::string::npos) return true;
  }
  return false;
}

TEST_P(SandboxTest, AForkBombIsLimitedAndCleanedUp) {
  const std::string marker = std::to_string(100 + ::getpid() % 800) + ".25";
  // 400 sleeps against a limit of 64: the shell reports the forks it could not make.
  const std::string script = "i=0; while [ $i -lt 400 ]; do sleep " + marker + " >/dev/null 2>&1 & i=$((i+1)); done; "
                             "echo spawned $i";
  auto result = sh(script, sandbox(), 60);
  EXPECT_NE(result.end, ProcessResult::End::timed_out);
  EXPECT_TRUE(result.output.find("fork") != std::string::npos ||
              result.output.find("Resource temporarily unavailable") != std::string::npos)
      << result.output;
  EXPECT_FALSE(process_with_argument(marker)) << "sleeps outlived the sandbox";
}

TEST_P(SandboxTest, LeavingTheProcessGroupDoesNotOutliveTheRun) {
  const std::string marker = std::to_string(100 + ::getpid() % 800) + ".75";
  auto result = sh("setsid sleep " + marker + " & sleep 0.2; echo done", sandbox());
  EXPECT_NE(result.output.find("done"), std::string::npos) << result.output;
  EXPECT_FALSE(process_with_argument(marker)) << result.output;
}

TEST_P(SandboxTest, CpuTimeIsLimited) {
  auto box = sandbox();
  box.cpu_seconds = 1;
  auto result = sh("while :; do :; done", box, 30);
  EXPECT_EQ(result.end, ProcessResult::End::signaled) << result.describe() << "\n" << result.output;
  EXPECT_EQ(result.signal, SIGXCPU);
  EXPECT_LT(result.seconds, 15);
}

TEST_P(SandboxTest, FileSizeIsLimited) {
  auto box = sandbox();
  box.file_bytes = 1 << 20;
  auto result = sh("head -c 4000000 /dev/zero > big.bin; echo wrote", box);
  EXPECT_LE(fs::file_size(workspace_ / "big.bin"), 1u << 20) << result.output;
}

TEST_P(SandboxTest, MemoryIsLimited) {
  auto box = sandbox();
  box.memory_bytes = 256l << 20;
  // A string doubled up to 256 MiB: more than the limit, allowed without it.
  const std::string script = "awk 'BEGIN { s = \"x\"; while (length(s) < 200000000) s = s s; print \"allocated\", length(s) }'";
  auto control = sh(script, sandbox());
  ASSERT_NE(control.output.find("allocated 268435456"), std::string::npos) << "control: " << control.output;
  auto result = sh(script, box);
  EXPECT_EQ(result.output.find("allocated"), std::string::npos) << result.output;
  EXPECT_FALSE(result.ok()) << result.output;
}

// A build reads the CUTLASS headers (they may sit outside /usr, e.g. in the checkout's .deps) and nothing
// beside them, and cannot change them.
TEST_P(SandboxTest, ABuildReadsTheCutlassHeadersButCannotWriteThem) {
  const auto token = random_token();
  const fs::path headers = outside_ / "cutlass" / "include";
  fs::create_directories(headers / "cutlass");
  { std::ofstream(headers / "cutlass" / "version.h") << token << '\n'; }
  { std::ofstream(outside_ / "secret.txt") << token << "-beside\n"; }
  Sandbox base;
  base.mode = SandboxMode::strict;
  base.launcher = D2K_SANDBOX_PATH;
  base.namespaces = GetParam();
  const Sandbox box = d2k::build_sandbox(base, "sh", fs::path(D2K_ROOT_DIR) / "include", workspace_, 20, headers);
  const std::string version = (headers / "cutlass" / "version.h").string();
  auto read = sh("cat " + version, box);
  EXPECT_TRUE(read.ok()) << read.describe() << "\n" << read.output;
  EXPECT_NE(read.output.find(token), std::string::npos) << read.output;
  auto beside = sh("cat " + (outside_ / "secret.txt").string(), box);
  EXPECT_EQ(beside.output.find(token + "-beside"), std::string::npos) << beside.output;
  auto write = sh("echo changed > " + version + "; echo new > " + (headers / "new.h").string(), box);
  EXPECT_FALSE(write.ok()) << write.output;
  EXPECT_NE(read_text(headers / "cutlass" / "version.h").find(token), std::string::npos);
  EXPECT_FALSE(fs::exists(headers / "new.h"));
}

INSTANTIATE_TEST_SUITE_P(Paths, SandboxTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) { return info.param ? "Namespaces" : "Landlock"; });

// A solution's build: an #include of a host file fails and its content stays out of the log.
class SandboxedBuild : public testing::TestWithParam<bool> {};

TEST_P(SandboxedBuild, IncludingAHostFileFailsWithoutShowingIt) {
  const fs::path dir = fresh_dir(std::string("build-") + (GetParam() ? "ns" : "landlock"));
  const auto token = random_token();
  const fs::path secret = dir / "outside" / "secret.h";
  fs::create_directories(secret.parent_path());
  { std::ofstream(secret) << token << "\n"; }
  const fs::path source = dir / "cheat.cpp";
  { std::ofstream(source) << "#include \"" << secret.string() << "\"\n#include \"/etc/passwd\"\nint x;\n"; }
  d2k::BuildOptions options;
  options.device = d2k::Device::cpu;
  options.cache_dir = dir / "cache";
  options.abi_include_dir = fs::path(D2K_ROOT_DIR) / "include";
  options.timeout_seconds = 60;

  options.sandbox = Sandbox{SandboxMode::off};
  auto control = d2k::build_solution(d2k::load_solution(source), options);
  ASSERT_NE(control.log.find(token), std::string::npos) << "control: " << control.log;

  Sandbox box;
  box.mode = SandboxMode::strict;
  box.launcher = D2K_SANDBOX_PATH;
  box.namespaces = GetParam();
  options.sandbox = box;
  auto result = d2k::build_solution(d2k::load_solution(source), options);
  EXPECT_FALSE(result.ok);
  EXPECT_FALSE(result.cached) << "a build made without the sandbox must not be reused by one with it";
  EXPECT_EQ(result.log.find(token), std::string::npos) << result.log;
  EXPECT_EQ(result.log.find("root:"), std::string::npos) << result.log;
  EXPECT_NE(result.log.find("d2k-sandbox: "), std::string::npos) << result.log;
}

TEST_P(SandboxedBuild, AnHonestSolutionBuilds) {
  const fs::path dir = fresh_dir(std::string("honest-") + (GetParam() ? "ns" : "landlock"));
  const fs::path source = dir / "honest.cpp";
  { std::ofstream(source) << "#include <cmath>\n#include <vector>\n#include \"d2k/solution.h\"\n"
                             "extern \"C\" int d2k_run(const d2k_call*) { std::vector<float> v(3); return int(std::sqrt(v[0])); }\n"; }
  d2k::BuildOptions options;
  options.device = d2k::Device::cpu;
  options.cache_dir = dir / "cache";
  options.abi_include_dir = fs::path(D2K_ROOT_DIR) / "include";
  Sandbox box;
  box.mode = SandboxMode::strict;
  box.launcher = D2K_SANDBOX_PATH;
  box.namespaces = GetParam();
  options.sandbox = box;
  auto result = d2k::build_solution(d2k::load_solution(source), options);
  EXPECT_TRUE(result.ok) << result.log;
  EXPECT_TRUE(fs::exists(result.library));
}

INSTANTIATE_TEST_SUITE_P(Paths, SandboxedBuild, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) { return info.param ? "Namespaces" : "Landlock"; });

// The pinned CUTLASS that scripts/setup installs, for real: a cuda solution including CuTe and CUTLASS
// compiles for sm_90a in the strict sandbox. Needs nvcc and the install, not a GPU.
TEST(SandboxedCudaBuild, ASolutionIncludingCuteCompilesForSm90a) {
  const fs::path headers = d2k::cutlass_include_dir(D2K_ROOT_DIR);
  if (headers.empty()) GTEST_SKIP() << "no CUTLASS headers in " D2K_ROOT_DIR "/.deps/cutlass/include: run scripts/install-cutlass";
  if (std::system("nvcc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no nvcc on PATH: cannot compile a cuda solution here";
  const fs::path dir = fresh_dir("cute");
  const fs::path source = dir / "cute_kernel.cu";
  {
    std::ofstream(source) << R"(#include <cute/layout.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/version.h>
#include "d2k/solution.h"
static_assert(CUTLASS_MAJOR == 4 && CUTLASS_MINOR == 2, "scripts/install-cutlass pins CUTLASS 4.2");
__global__ void fill(cutlass::bfloat16_t* out) {
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}, cute::Int<8>{}), cute::LayoutRight{});
  out[layout(threadIdx.x % 4, threadIdx.x / 4)] = cutlass::bfloat16_t(float(threadIdx.x));
}
extern "C" int d2k_run(const d2k_call* call) {
  fill<<<1, 32, 0, static_cast<cudaStream_t>(call->stream)>>>(static_cast<cutlass::bfloat16_t*>(call->outputs[0].data));
  return 0;
}
)";
  }
  d2k::BuildOptions options;
  options.device = d2k::Device::cuda;
  options.cache_dir = dir / "cache";
  options.abi_include_dir = fs::path(D2K_ROOT_DIR) / "include";
  options.cutlass_include_dir = headers;
  options.timeout_seconds = 300;
  Sandbox box;
  box.mode = SandboxMode::strict;
  box.launcher = D2K_SANDBOX_PATH;
  options.sandbox = box;
  auto result = d2k::build_solution(d2k::load_solution(source), options);
  EXPECT_TRUE(result.ok) << result.command << "\n" << result.log;
  EXPECT_NE(result.command.find("-gencode=arch=compute_90a,code=sm_90a"), std::string::npos) << result.command;
  EXPECT_NE(result.command.find("-isystem " + headers.string()), std::string::npos) << result.command;
  fs::remove_all(dir);
}

}  // namespace

namespace {

TEST(SandboxMode, ParsesTheThreeModesAndNothingElse) {
  for (auto mode : {SandboxMode::strict, SandboxMode::best_effort, SandboxMode::off})
    EXPECT_EQ(d2k::parse_sandbox_mode(d2k::name_of(mode)), mode);
  EXPECT_FALSE(d2k::parse_sandbox_mode("none"));
  EXPECT_FALSE(d2k::parse_sandbox_mode("Strict"));
}

TEST(SandboxEnvironment, PassesWhatFindsProgramsAndDevicesOnly) {
  for (const char* name : {"PATH", "LANG", "LC_NUMERIC", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"})
    EXPECT_TRUE(d2k::passes_to_sandbox(name)) << name;
  for (const char* name : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "LD_PRELOAD", "HOME", "D2K_ROOT",
                           "D2K_CACHE_DIR", "SSH_AUTH_SOCK", "PATHX"})
    EXPECT_FALSE(d2k::passes_to_sandbox(name)) << name;
}

}  // namespace

namespace {

// Root on a machine that refuses user namespaces: the same new root, and the command runs as nobody
// so that root-owned files stay closed and RLIMIT_NPROC applies.
TEST(SandboxWithoutUserNamespace, RunsAsNobodyWithTheProcessLimit) {
  if (::geteuid() != 0) GTEST_SKIP() << "only a root launcher takes this path";
  const fs::path work = fresh_dir("no-userns");
  const fs::path secret = work.parent_path() / ("d2k-sandbox-root-only-" + std::to_string(::getpid()));
  const auto token = random_token();
  { std::ofstream(secret) << token; }
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
  ProcessSpec spec;
  spec.argv = {D2K_SANDBOX_PATH, "--strict", "--without-user-namespace", "--system", "--rw", work.string(),
               "--ro", secret.string(), "--home", work.string(), "--processes", "16", "--",
               "sh", "-c", "id -u; cat " + secret.string() + "; i=0; while [ $i -lt 100 ]; do sleep 3 >/dev/null 2>&1 & i=$((i+1)); done; echo all forked"};
  spec.timeout_seconds = 30;
  auto result = run_process(spec);
  fs::remove(secret);
  EXPECT_NE(result.output.find("namespaces (mount, pid, net"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("65534\n"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find(token), std::string::npos) << "a root-only file, though inside the policy";
  EXPECT_EQ(result.output.find("all forked"), std::string::npos) << result.output;
}

}  // namespace
