// Triton solutions without a GPU (docs/abi.md, "Triton solutions"): packaging, the cpu device's refusal,
// the warm-up's ahead-of-time compile for sm_90a, the import guard, and the launcher interface bound to the
// runtime's tensor objects. The worker's embedded interpreter needs a GPU: tests/e2e and GPU-TODO.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "runner/builder.hpp"
#include "runner/triton.hpp"

namespace fs = std::filesystem;
using namespace d2k;

namespace {

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class Triton : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / ("d2k-triton-" + std::to_string(::getpid()) + "-" +
                                            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::string why;
    auto found = find_triton(D2K_ROOT_DIR, why);
    ASSERT_TRUE(found) << "scripts/setup installs triton==3.6.0 into .deps/triton: " << why;
    setup_ = *found;
    options_.device = Device::cuda;
    options_.cache_dir = root_ / "cache";
    options_.abi_include_dir = fs::path(D2K_ROOT_DIR) / "include";
    options_.triton_version = setup_.version;
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path write(const std::string& relative, const std::string& text) {
    fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

  // norm/fused_add_rmsnorm's tensors for T x H, in place as the task declares them.
  static WireTensor bf16(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> strides, bool inplace) {
    return WireTensor{.name = name, .dtype = DType::bf16, .shape = shape, .strides = strides, .inplace = inplace};
  }
  WarmupSpec norm_spec(const BuildResult& build, int64_t T, int64_t H, int64_t row_stride) {
    const fs::path entry = build.library.parent_path();
    WarmupSpec spec;
    spec.src_dir = entry / "src";
    const auto manifest = nlohmann::json::parse(read(build.library));
    spec.entry = manifest.at("entry");
    spec.modules = manifest.at("modules").get<std::vector<std::string>>();
    spec.inputs = {bf16("x", {T, H}, {row_stride, 1}, false), bf16("residual", {T, H}, {row_stride, 1}, false),
                   bf16("weight", {H}, {1}, false)};
    spec.outputs = {bf16("x", {T, H}, {row_stride, 1}, true), bf16("residual", {T, H}, {row_stride, 1}, true)};
    spec.scalars = {WireScalar{"eps", false, 1e-5}};
    spec.cache_dir = entry / "triton-cache";
    spec.scratch_dir = root_ / "scratch";
    spec.timeout_seconds = 300;
    return spec;
  }
  BuildResult build(const fs::path& path) {
    const Solution solution = load_solution(path);
    EXPECT_EQ(solution.language, Language::triton);
    BuildResult result = build_solution(solution, options_);
    EXPECT_TRUE(result.ok) << result.log;
    return result;
  }

  fs::path root_;
  TritonSetup setup_;
  BuildOptions options_;
};

const fs::path kNormTriton = fs::path(D2K_ROOT_DIR) / "tasks/norm/fused_add_rmsnorm/solution/triton";
const fs::path kCorpus = fs::path(D2K_ROOT_DIR) / "tests/corpus";

TEST_F(Triton, APythonFileOrFolderIsATritonSolution) {
  const Solution file = load_solution(write("one/add.py", "def launch(): pass\n"));
  EXPECT_EQ(file.language, Language::triton);
  EXPECT_EQ(file.entry, "add");
  write("many/solution.py", "import helper\n");
  write("many/helper.py", "\n");
  const Solution folder = load_solution(root_ / "many");
  EXPECT_EQ(folder.entry, "solution");
  EXPECT_EQ(folder.sources.size(), 2u);
  EXPECT_EQ(name_of(folder.language), "triton");
}

TEST_F(Triton, PythonBesideCudaIsNotTheSolutionAndSeveralEntriesAreAnError) {
  // An agent's scratch script beside its kernel: the folder stays a CUDA solution.
  write("mixed/a.py", "\n");
  write("mixed/b.cu", "\n");
  const Solution mixed = load_solution(root_ / "mixed");
  EXPECT_EQ(mixed.language, Language::cuda);
  ASSERT_EQ(mixed.sources.size(), 1u);
  EXPECT_EQ(mixed.sources[0].filename(), "b.cu");
  write("two/a.py", "\n");
  write("two/b.py", "\n");
  try {
    load_solution(root_ / "two");
    FAIL() << "two modules and no solution.py loaded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no solution.py"), std::string::npos) << error.what();
  }
}

TEST_F(Triton, TheCpuDeviceHasNoTritonBackend) {
  options_.device = Device::cpu;
  const BuildResult result = build_solution(load_solution(kNormTriton), options_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.log.find("the cpu device has no Triton backend"), std::string::npos) << result.log;
  EXPECT_FALSE(fs::exists(options_.cache_dir)) << "nothing is built for a device that cannot run it";
}

TEST_F(Triton, WithoutTritonTheBuildSaysWhy) {
  options_.triton_version.clear();
  options_.triton_missing = "python3 cannot import triton";
  const BuildResult result = build_solution(load_solution(kNormTriton), options_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.log.find("no usable Triton: python3 cannot import triton"), std::string::npos) << result.log;
}

TEST_F(Triton, TheBuildIsCachedByContent) {
  const BuildResult first = build(kNormTriton);
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(first.library.filename(), "triton.json");
  EXPECT_TRUE(fs::is_regular_file(first.library.parent_path() / "src" / "fused_add_rmsnorm.py"));
  const BuildResult again = build(kNormTriton);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.hash, first.hash);
  const fs::path copy = write("changed/fused_add_rmsnorm.py", read(kNormTriton / "fused_add_rmsnorm.py") + "\n# changed\n");
  EXPECT_NE(build(copy).hash, first.hash);
}

TEST_F(Triton, FindsThePinnedTritonAndAnEmbeddablePython) {
  EXPECT_EQ(setup_.version, kTritonVersion);
  EXPECT_TRUE(fs::is_directory(setup_.site / "triton" / "backends" / "nvidia"));
  EXPECT_TRUE(fs::is_regular_file(setup_.libpython)) << "the worker embeds CPython: " << setup_.libpython;
}

// The CI test of compiling ahead of time: the shipped Triton solution's kernel, for sm_90a, with no GPU.
TEST_F(Triton, TheWarmUpCompilesTheKernelsForSm90aAheadOfTime) {
  const BuildResult built = build(kNormTriton);
  WarmupSpec spec = norm_spec(built, 37, 3584, 3584);
  const WarmupResult warm = triton_warmup(setup_, spec);
  ASSERT_TRUE(warm.ok) << warm.kind << ": " << warm.message << "\n" << warm.log;
  ASSERT_EQ(warm.kernels.size(), 1u) << warm.kernels.dump();
  EXPECT_EQ(warm.kernels[0]["kernel"], "fused_add_rmsnorm_kernel");
  EXPECT_EQ(warm.kernels[0]["sm"], 90);
  EXPECT_GT(warm.kernels[0]["cubin_bytes"].get<int>(), 1000);
  int cubins = 0;
  for (const auto& item : fs::recursive_directory_iterator(spec.cache_dir)) {
    if (item.path().extension() == ".cubin") ++cubins;
    if (item.path().extension() == ".ptx") EXPECT_NE(read(item.path()).find(".target sm_90a"), std::string::npos);
  }
  EXPECT_EQ(cubins, 1);
  // Another shape (a strided row, another block size) is another kernel; the same one is not compiled twice.
  const WarmupResult other = triton_warmup(setup_, norm_spec(built, 19, 8192, 8200));
  ASSERT_TRUE(other.ok) << other.message;
  EXPECT_NE(other.kernels[0]["hash"], warm.kernels[0]["hash"]);
  const WarmupResult same = triton_warmup(setup_, spec);
  ASSERT_TRUE(same.ok) << same.message;
  EXPECT_EQ(same.kernels[0]["hash"], warm.kernels[0]["hash"]);
  cubins = 0;
  for (const auto& item : fs::recursive_directory_iterator(spec.cache_dir)) cubins += item.path().extension() == ".cubin";
  EXPECT_EQ(cubins, 2);
}

// moe/topk_softmax's Triton solution compiles for sm_90a ahead of time: the rows kernel at the 60-expert
// smoke shape without renormalization, and the chunked kernel for a k past the rows kernel's unrolled rounds,
// with column-major logits and strided outputs.
TEST_F(Triton, TheTopkSoftmaxSolutionCompilesBothKernelsForSm90a) {
  const BuildResult built = build(fs::path(D2K_ROOT_DIR) / "tasks/moe/topk_softmax/solution/triton");
  const auto spec = [&](int64_t T, int64_t E, int64_t k, std::vector<int64_t> logit_strides, int64_t out_row,
                        int renormalize) {
    WarmupSpec s = norm_spec(built, 1, 1, 1);
    s.inputs = {WireTensor{.name = "logits", .dtype = DType::f32, .shape = {T, E}, .strides = logit_strides}};
    s.outputs = {WireTensor{.name = "weights", .dtype = DType::f32, .shape = {T, k}, .strides = {out_row, 1}},
                 WireTensor{.name = "ids", .dtype = DType::i32, .shape = {T, k}, .strides = {out_row, 1}}};
    s.scalars = {WireScalar{"renormalize", true, static_cast<double>(renormalize)}};
    return s;
  };
  const WarmupResult rows = triton_warmup(setup_, spec(37, 60, 4, {60, 1}, 4, 0));
  ASSERT_TRUE(rows.ok) << rows.kind << ": " << rows.message << "\n" << rows.log;
  ASSERT_EQ(rows.kernels.size(), 1u) << rows.kernels.dump();
  EXPECT_EQ(rows.kernels[0]["kernel"], "topk_softmax_rows");
  EXPECT_EQ(rows.kernels[0]["sm"], 90);
  const WarmupResult any = triton_warmup(setup_, spec(5, 100, 40, {1, 5}, 42, 1));
  ASSERT_TRUE(any.ok) << any.kind << ": " << any.message << "\n" << any.log;
  ASSERT_EQ(any.kernels.size(), 1u) << any.kernels.dump();
  EXPECT_EQ(any.kernels[0]["kernel"], "topk_softmax_any");
  EXPECT_GT(any.kernels[0]["cubin_bytes"].get<int>(), 1000);
}

TEST_F(Triton, ALibraryImportIsRefused) {
  for (const std::string name : {"library_torch", "library_numpy", "library_ctypes", "library_lazy_torch"}) {
    SCOPED_TRACE(name);
    const BuildResult built = build(kCorpus / (name + "_triton.py"));
    const WarmupResult warm = triton_warmup(setup_, norm_spec(built, 4, 256, 256));
    EXPECT_FALSE(warm.ok);
    EXPECT_EQ(warm.kind, "refused");
    const std::string module = name == "library_numpy" ? "numpy" : name == "library_ctypes" ? "ctypes" : "torch";
    EXPECT_NE(warm.message.find(name + "_triton.py imports '" + module + "': refused (no library may do the work"),
              std::string::npos)
        << warm.message;
  }
}

TEST_F(Triton, OnlyTritonAndPurePythonModulesMayBeImported) {
  const BuildResult os_import = build(write("os/solution.py", "import math\nimport os\ndef launch(**kw): pass\n"));
  const WarmupResult warm = triton_warmup(setup_, norm_spec(os_import, 4, 256, 256));
  EXPECT_EQ(warm.kind, "refused");
  EXPECT_NE(warm.message.find("imports 'os': refused (a Triton solution imports only triton, its own modules and math"),
            std::string::npos)
      << warm.message;
  // Its own modules are fine.
  write("own/helper.py", "import triton\nBLOCK = 256\n");
  write("own/solution.py", "import helper\ndef launch(**kw): assert helper.BLOCK == 256\n");
  const BuildResult own = build(root_ / "own");
  const WarmupResult fine = triton_warmup(setup_, norm_spec(own, 4, 256, 256));
  EXPECT_TRUE(fine.ok) << fine.kind << ": " << fine.message;
}

// The warm-up runs the solution's Python in the build sandbox: no host files (the d2k tree with its
// references), beside a control without the sandbox that reads them.
TEST_F(Triton, TheWarmUpRunsInTheSandbox) {
  const std::string reference = (fs::path(D2K_ROOT_DIR) / "tasks/norm/fused_add_rmsnorm/reference.cpp").string();
  const BuildResult built = build(write("peek/solution.py", "def launch(x, residual, weight, eps, workspace):\n"
                                                            "    open('" + reference + "').read()\n"));
  WarmupSpec spec = norm_spec(built, 4, 256, 256);
  const WarmupResult control = triton_warmup(setup_, spec);
  EXPECT_TRUE(control.ok) << "without the sandbox the file is there: " << control.message;
  spec.sandbox = Sandbox{.mode = SandboxMode::strict, .launcher = D2K_SANDBOX_PATH};
  const WarmupResult boxed = triton_warmup(setup_, spec);
  EXPECT_EQ(boxed.kind, "run") << boxed.message << "\n" << boxed.log;
  EXPECT_NE(boxed.message.find("FileNotFoundError"), std::string::npos) << boxed.message;
  // The honest solution compiles there as well: Python, Triton's folder and ptxas are in reach.
  const BuildResult honest = build(kNormTriton);
  WarmupSpec norm = norm_spec(honest, 37, 3584, 3584);
  norm.sandbox = spec.sandbox;
  const WarmupResult warm = triton_warmup(setup_, norm);
  EXPECT_TRUE(warm.ok) << warm.kind << ": " << warm.message << "\n" << warm.log;
}

// The interface: tensor objects with the task's names, dtypes, shapes and strides, the in-place output the
// same object as its input, scalars as Python numbers, the workspace a uint8 tensor of the asked size.
TEST_F(Triton, TheLauncherGetsTheTasksTensorsAndScalarsByName) {
  const BuildResult built = build(write("bind/solution.py", R"(
import triton.language as tl
seen = {}
def workspace_size(x, residual, weight, eps):
    assert x.shape == (5, 300) and x.stride() == (320, 1) and x.stride(0) == 320, x
    return 4096
def launch(x, residual, weight, eps, workspace):
    assert (x.name, residual.name, weight.name) == ("x", "residual", "weight")
    assert x.dtype == tl.bfloat16 and weight.dtype == tl.bfloat16, x.dtype
    assert x.shape == (5, 300) and residual.shape == (5, 300) and weight.shape == (300,), (x, weight)
    assert x.stride() == (320, 1) and not x.is_contiguous() and weight.is_contiguous()
    assert x.numel() == 1500 and x.element_size() == 2 and x.ndim == 2 and x.size(1) == 300
    assert isinstance(eps, float) and abs(eps - 1e-5) < 1e-12, eps
    assert workspace is not None and workspace.shape == (4096,) and workspace.dtype == tl.uint8
    ptrs = {x.data_ptr(), residual.data_ptr(), weight.data_ptr(), workspace.data_ptr()}
    assert len(ptrs) == 4 and all(p % 65536 == 0 for p in ptrs), ptrs
)"));
  const WarmupResult warm = triton_warmup(setup_, norm_spec(built, 5, 300, 320));
  EXPECT_TRUE(warm.ok) << warm.kind << ": " << warm.message;
  // A launcher whose parameters are not the task's names is told which.
  const BuildResult wrong = build(write("wrong/solution.py", "def launch(x, res, weight, eps, workspace): pass\n"));
  const WarmupResult told = triton_warmup(setup_, norm_spec(wrong, 5, 300, 320));
  EXPECT_EQ(told.kind, "load");
  EXPECT_NE(told.message.find("missing ['residual'] unknown ['res']"), std::string::npos) << told.message;
}

TEST_F(Triton, AKernelThatDoesNotCompileIsACompileError) {
  const BuildResult built = build(write("bad/solution.py", R"(
import triton
import triton.language as tl
@triton.jit
def kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), undefined_name)
def launch(x, residual, weight, eps, workspace):
    kernel[(1,)](x, BLOCK=128)
)"));
  const WarmupResult warm = triton_warmup(setup_, norm_spec(built, 4, 256, 256));
  EXPECT_EQ(warm.kind, "compile") << warm.message;
  EXPECT_NE(warm.message.find("undefined_name"), std::string::npos) << warm.message;
  EXPECT_NE(warm.message.find("solution.py:"), std::string::npos) << "the solution's line: " << warm.message;
}

}  // namespace

// The worker's side without a GPU: the embedded CPython (worker/triton.cpp) started as the worker starts
// it, then the worker's seccomp filter (no program may run after it: no ptxas, gcc, ldconfig), the solution
// loaded under the guard, and a call bound to the runtime's tensor objects, down to the point where Triton
// loads the warm-up's kernel onto the device. Here the device is CUDA's stub libcuda (every call fails),
// which shows that the kernel and its launcher stub came from the warm-up's cache: a compile in the worker
// fails otherwise, with d2k's message. In a child process, since the filter stays for the process's life.
#include "worker/leftovers.hpp"
#include "worker/seccomp.hpp"
#include "worker/triton.hpp"

#include <dlfcn.h>
#include <sys/wait.h>

namespace {

const fs::path kCudaStubs = "/usr/local/cuda/lib64/stubs";

// The child's checks: what failed, one line each.
std::string worker_checks(WorkerRequest request, const fs::path& lazy_library, const std::vector<WireTensor>& other_inputs,
                          const std::vector<WireTensor>& other_outputs) {
  std::ostringstream failed;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) failed << what << "\n";
  };
  start_triton(*request.python);
  forbid_outside_work({});  // as the worker does between its set-up and the solution's load
  expect(forbidden_library_loaded() == std::nullopt, "libtriton from the Triton d2k gave is refused");
  const TritonLoad loaded = load_triton(request);
  if (loaded.refused || loaded.error) return "load: " + loaded.refused.value_or(loaded.error.value_or(""));

  std::vector<d2k_tensor> inputs(3), outputs(2);
  const char* names[] = {"x", "residual", "weight"};
  for (int i = 0; i < 3; ++i) {
    inputs[i].name = names[i];
    inputs[i].data = reinterpret_cast<void*>((uintptr_t{1} << 40) + (uintptr_t(i) << 32));
    inputs[i].dtype = D2K_BFLOAT16;
  }
  outputs[0] = inputs[0];
  outputs[1] = inputs[1];
  d2k_scalar eps{"eps", D2K_SCALAR_FLOAT, 0, 1e-5};
  char error[D2K_ERROR_CAPACITY] = {};
  d2k_call call{};
  call.inputs = inputs.data();
  call.num_inputs = 3;
  call.outputs = outputs.data();
  call.num_outputs = 2;
  call.scalars = &eps;
  call.num_scalars = 1;
  call.error = error;
  size_t bytes = 99;
  expect(loaded.library.workspace_size(&call, &bytes) == 0 && bytes == 0, "workspace_size: " + std::string(error));
  expect(loaded.library.run(&call) != 0, "a call on the stub libcuda succeeded");
  std::string message = error;
  std::cout << "the call's error, with the stub libcuda: " << message << "\n";
  expect(message.find("launch raised RuntimeError: Triton Error [CUDA]") != std::string::npos,
         "not the stub's error, loading the cached kernel: " + message);
  expect(triton_refused_import() == std::nullopt, "an import refused");

  // Shapes the warm-up did not see (another block size): the worker refuses to compile, and says so.
  request.inputs = other_inputs;
  request.outputs = other_outputs;
  const TritonLoad again = load_triton(request);
  error[0] = '\0';
  expect(again.library.run(&call) != 0, "a kernel the warm-up did not compile ran");
  message = error;
  expect(message.find("a kernel was not in the warm-up's Triton cache, and nothing is compiled in the worker") !=
             std::string::npos,
         "the miss is not d2k's message: " + message);

  // An import the guard refuses, inside a call: the worker's check names it after the call.
  request.library = lazy_library.string();
  request.python->entry = "library_lazy_torch_triton";
  request.python->modules = {"library_lazy_torch_triton"};
  const TritonLoad cheat = load_triton(request);
  expect(!cheat.refused && !cheat.error, "the lazy cheat did not load: its import is in launch");
  expect(cheat.library.run(&call) != 0, "the lazy cheat's call succeeded");
  const auto refused = triton_refused_import();
  expect(refused && refused->find("library_lazy_torch_triton.py imports 'torch'") != std::string::npos,
         "the refused import is not named: " + refused.value_or("(none)"));
  return failed.str();
}

TEST_F(Triton, TheWorkerRunsTheLauncherOnTheWarmUpsKernelsWithoutCompiling) {
  if (!fs::exists(kCudaStubs / "libcuda.so")) GTEST_SKIP() << "no CUDA toolkit stubs in " << kCudaStubs;
  // libcuda.so.1 for Triton's C modules: the stub, by its soname, found by Triton's knob and already loaded.
  const fs::path stubs = root_ / "stubs";
  fs::create_directories(stubs);
  fs::create_symlink(kCudaStubs / "libcuda.so", stubs / "libcuda.so.1");
  ::setenv("TRITON_LIBCUDA_PATH", stubs.c_str(), 1);
  ::setenv("LD_LIBRARY_PATH", stubs.c_str(), 1);  // for the warm-up, which loads Triton's C modules too
  ASSERT_NE(::dlopen((stubs / "libcuda.so.1").c_str(), RTLD_NOW | RTLD_GLOBAL), nullptr) << ::dlerror();

  const BuildResult built = build(kNormTriton);
  WarmupSpec spec = norm_spec(built, 37, 3584, 3584);
  spec.build_stubs = true;
  const WarmupResult warm = triton_warmup(setup_, spec);
  ASSERT_TRUE(warm.ok) << warm.kind << ": " << warm.message << "\n" << warm.log;
  const BuildResult lazy = build(kCorpus / "library_lazy_torch_triton.py");
  const WarmupSpec other = norm_spec(built, 37, 2048, 2048);

  WorkerRequest request;
  request.library = built.library.string();
  request.device = Device::cuda;
  request.inputs = spec.inputs;
  request.outputs = spec.outputs;
  request.scalars = spec.scalars;
  request.python = wire_python(setup_, spec);

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::cout.flush();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::string failed;
    try {
      failed = worker_checks(request, lazy.library, other.inputs, other.outputs);
    } catch (const std::exception& error) {
      failed = std::string("threw: ") + error.what();
    }
    std::cout.flush();
    (void)!::write(pipe_fds[1], failed.data(), failed.size());
    ::_exit(failed.empty() ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  std::string failed;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) failed.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child " << (WIFSIGNALED(status) ? "died of a signal" : "failed")
                                                            << ":\n" << failed;
}

}  // namespace
