// d2k-lt-probe: asks cuBLASLt for dense one-byte products in many configurations and prints, per
// configuration, what its heuristic offered, what cublasLtMatmulAlgoCheck and cublasLtMatmul said of each
// candidate, the best rate of those that ran, and cuBLASLt's own error messages. It is how the refused
// fp8 ceiling of the H200 is diagnosed: the ceiling (src/timing/ceilings.cpp) runs the same attempts.
//
//   d2k-lt-probe [n ...]        sizes, default 8192 4096
//
// Exit status: 0 when some fp8 and some int8 configuration ran at every size, 1 otherwise, 2 on an error
// (a CUDA call failed, a product faulted), 124 when the watchdog stopped it (all of it takes seconds).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "timing/ceilings_lt.hpp"
#include "timing/cuda_util.hpp"

namespace {

constexpr unsigned kWatchdogSeconds = 60;
constexpr int kWarmup = 2;
constexpr int kSamples = 5;
constexpr std::size_t kMessageChars = 400;
constexpr std::size_t kMessagesPerConfig = 4;

std::vector<std::string> lt_messages;  // cuBLASLt's error log since the last attempt

void on_lt_log(int level, const char* function, const char* message) {
  lt_messages.push_back(fmt::format("{}: {}", function ? function : "?", message ? message : ""));
}

void on_watchdog(int) {
  static const char text[] = "d2k-lt-probe: stopped by its watchdog\n";
  (void)!::write(STDERR_FILENO, text, sizeof text - 1);
  ::_exit(124);
}

// The configurations the ceilings use, then layouts and an fp8 output with fast accumulation that they
// do not, to show what this cuBLASLt accepts at all.
std::vector<d2k::LtConfig> probe_configs(bool fp8) {
  std::vector<d2k::LtConfig> configs = fp8 ? d2k::fp8_configs() : d2k::int8_configs();
  const d2k::LtConfig base = configs.front();
  for (const auto& [a_t, b_t] : {std::pair{false, false}, std::pair{false, true}, std::pair{true, true}}) {
    d2k::LtConfig layout = base;
    layout.a_transposed = a_t;
    layout.b_transposed = b_t;
    configs.push_back(layout);
  }
  if (fp8) {
    d2k::LtConfig fp8_out_fast;
    fp8_out_fast.d_type = CUDA_R_8F_E4M3;
    fp8_out_fast.in_place = false;
    fp8_out_fast.d_scale = true;
    fp8_out_fast.scalar_scale_modes = true;
    fp8_out_fast.fast_accum = 1;
    configs.push_back(fp8_out_fast);
  }
  return configs;
}

// Where a symbol was loaded from: cuBLAS and cuBLASLt from different installs would explain much.
std::string library_of(void* symbol) {
  Dl_info library{};
  return dladdr(symbol, &library) != 0 && library.dli_fname ? library.dli_fname : "unknown";
}

void print_environment() {
  fmt::print("{}; cuBLAS from {}\n", d2k::lt_version(), library_of(reinterpret_cast<void*>(&cublasGetStatusName)));
  std::fflush(stdout);
  int device = 0, driver = 0, runtime = 0;
  d2k::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  d2k::check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  d2k::check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  d2k::check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  fmt::print("device: {} (sm_{}{}, {} SMs), CUDA driver API {}, runtime {}\n", properties.name, properties.major,
             properties.minor, properties.multiProcessorCount, driver, runtime);
}

// One line per configuration, then cuBLASLt's messages for it. True if some candidate ran.
bool probe(const d2k::LtConfig& config, const d2k::LtOperands& operands, cudaStream_t stream) {
  lt_messages.clear();
  const d2k::LtAttempt attempt =
      d2k::attempt_lt(config, operands, stream, d2k::LtTiming::each_that_runs, kWarmup, kSamples);
  std::string best = "none ran";
  if (attempt.ran())
    best = fmt::format("best {:.1f} {} (candidate {})", attempt.rate(), operands.fp8 ? "TFLOP/s" : "TOPS",
                       attempt.chosen);
  fmt::print("n={} | {} | {} | {}\n", operands.n, config.describe(), attempt.summary(), best);
  std::set<std::string> seen;
  for (const std::string& message : lt_messages) {
    if (seen.size() == kMessagesPerConfig) break;
    if (!seen.insert(message).second) continue;
    fmt::print("    cuBLASLt: {}\n", message.substr(0, kMessageChars));
  }
  std::fflush(stdout);
  if (!attempt.stream_error.empty()) d2k::fail("the stream failed; stopping: {}", attempt.stream_error);
  return attempt.ran();
}

int run(const std::vector<int>& sizes) {
  print_environment();
  // cuBLASLt's errors say why it refuses a call; they are printed under each configuration, unless
  // its own logging was asked for (CUBLASLT_LOG_LEVEL or CUBLASLT_LOG_MASK), which then prints them.
  if (!std::getenv("CUBLASLT_LOG_LEVEL") && !std::getenv("CUBLASLT_LOG_MASK")) {
    cublasLtLoggerSetCallback(on_lt_log);
    cublasLtLoggerSetMask(1);
  }
  d2k::CudaStream stream;
  bool every_kind_ran = true;
  for (const int n : sizes) {
    for (const bool fp8 : {true, false}) {
      const d2k::LtOperands operands(n, fp8);
      bool any = false;
      for (const d2k::LtConfig& config : probe_configs(fp8)) any = probe(config, operands, stream.get()) || any;
      every_kind_ran = every_kind_ran && any;
    }
  }
  return every_kind_ran ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGALRM, on_watchdog);
  ::alarm(kWatchdogSeconds);
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    const int n = std::atoi(argv[i]);
    if (n < 16 || n % 16 != 0 || n > 16384) {
      fmt::print(stderr, "d2k-lt-probe: size '{}' is not a multiple of 16 in [16, 16384]\n", argv[i]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {8192, 4096};
  try {
    return run(sizes);
  } catch (const std::exception& error) {
    std::fflush(stdout);
    fmt::print(stderr, "d2k-lt-probe: {}\n", error.what());
    return 2;
  }
}
