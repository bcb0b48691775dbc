#include "runner/builder.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "runner/process.hpp"
#include "runner/sha256.hpp"
#include "triton/d2k_triton_source.hpp"

namespace fs = std::filesystem;

namespace d2k {
namespace {

// Placeholders in the command template: the cache key must not depend on where the checkout or the
// cache lives, only on what is compiled and how.
constexpr std::string_view kAbiDir = "{abi_include_dir}";
constexpr std::string_view kCutlassDir = "{cutlass_include_dir}";

std::string read_file(const fs::path& path) {
  auto bytes = file_bytes(path);
  if (!bytes) fail("cannot read {}", path.string());
  return std::move(*bytes);
}

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) fail("cannot write {}", path.string());
}

std::optional<Language> language_of_source(const fs::path& file) {
  std::string ext = file.extension().string();
  if (ext == ".cu") return Language::cuda;
  if (ext == ".cpp" || ext == ".cc") return Language::cpp;
  if (ext == ".py") return Language::triton;
  return std::nullopt;
}

bool is_header(const fs::path& file) {
  std::string ext = file.extension().string();
  return ext == ".h" || ext == ".hpp" || ext == ".cuh";
}

std::vector<std::string> command_template(const Solution& solution, const BuildOptions& options) {
  std::vector<std::string> argv;
  if (solution.language == Language::cuda) {
    std::string arch = options.cuda_arch;  // "sm_90a" -> compute_90a / sm_90a
    std::string compute = arch.starts_with("sm_") ? "compute_" + arch.substr(3) : arch;
    argv = {options.nvcc, "-O3",   "-std=c++17", "-shared",
            "-Xcompiler", "-fPIC", "-lineinfo",  fmt::format("-gencode=arch={},code={}", compute, arch)};
  } else {
    argv = {options.cxx, "-O2", "-std=c++17", "-shared", "-fPIC"};
  }
  argv.push_back(fmt::format("-I{}", kAbiDir));
  // -isystem: CUTLASS's own warnings are not the solution's.
  if (solution.language == Language::cuda && !options.cutlass_include_dir.empty())
    argv.insert(argv.end(), {"-isystem", std::string(kCutlassDir)});
  for (const auto& source : solution.sources) argv.push_back(source.filename().string());
  argv.insert(argv.end(), {"-o", "../solution.so"});
  return argv;
}

std::vector<std::string> concrete(std::vector<std::string> argv, const BuildOptions& options) {
  for (auto& arg : argv) {
    if (auto at = arg.find(kAbiDir); at != std::string::npos) {
      arg.replace(at, kAbiDir.size(), options.abi_include_dir.string());
    }
    if (arg == kCutlassDir) arg = options.cutlass_include_dir.string();
  }
  return argv;
}

// The compiler's identity: a new toolkit must not reuse builds of the old one. Asked once per process.
std::string compiler_version(const std::string& compiler) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard lock(mutex);
  if (auto found = versions.find(compiler); found != versions.end()) return found->second;
  ProcessSpec spec;
  spec.argv = {compiler, "--version"};
  spec.timeout_seconds = 60;
  ProcessResult result = run_process(spec);
  if (!result.ok()) return {};  // not cached: the build itself reports the missing compiler
  return versions[compiler] = result.output;
}

// Length-prefixed fields, so that no two different inputs hash the same concatenation.
void add_field(Sha256& hash, std::string_view label, std::string_view value) {
  hash.update(fmt::format("{}:{}:", label, value.size())).update(value);
}

struct Entry {
  fs::path dir;
  fs::path library() const { return dir / "solution.so"; }
  fs::path log() const { return dir / "build.log"; }
  fs::path status() const { return dir / "status"; }
};

BuildResult from_cache(const Entry& entry, BuildResult result) {
  result.ok = read_file(entry.status()).starts_with("ok");
  result.log = read_file(entry.log());
  result.library = result.ok ? entry.library() : fs::path();
  return result;
}

std::string shell_line(const std::vector<std::string>& argv) {
  return fmt::format("{}", fmt::join(argv, " "));
}

fs::path make_temp_dir(const fs::path& cache_dir, const std::string& hash) {
  std::string pattern = (cache_dir / fmt::format(".tmp-{}-XXXXXX", hash.substr(0, 16))).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    fail("cannot create a build folder in {}: {}", cache_dir.string(), std::strerror(errno));
  }
  return pattern;
}

// The end of a build's key: whether it runs sandboxed (a build that read what a sandbox would have
// refused, a host file, must not be reused by one that runs sandboxed) and every file's name and bytes.
// Returns the cache entry the key names, the cache folder created.
Entry close_key(Sha256& hash, const std::vector<std::pair<std::string, std::string>>& files,
                const BuildOptions& options, BuildResult& result) {
  if (options.sandbox) add_field(hash, "sandboxed", options.sandbox->mode == SandboxMode::off ? "no" : "yes");
  for (const auto& [name, bytes] : files) {
    add_field(hash, "name", name);
    add_field(hash, "bytes", bytes);
  }
  result.hash = hash.hex_digest();
  std::error_code error;
  fs::create_directories(options.cache_dir, error);
  if (error) fail("cannot create the build cache {}: {}", options.cache_dir.string(), error.message());
  return Entry{options.cache_dir / result.hash};
}

// A Triton solution is not compiled here: its kernels are compiled per workload by the warm-up
// (runner/triton.hpp). Its build is the cache entry: the sources under src/, the manifest triton.json (the
// "library" the worker is given: the entry module and the modules) and the Triton cache the warm-ups fill.
BuildResult build_triton(const Solution& solution, const BuildOptions& options, BuildResult result) {
  Sha256 hash;
  add_field(hash, "language", "triton");
  add_field(hash, "runtime", kTritonRuntimeSource);
  add_field(hash, "triton", options.triton_version);
  add_field(hash, "entry", solution.entry);
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& file : solution.sources) files.emplace_back(file.filename().string(), read_file(file));
  const Entry entry = close_key(hash, files, options, result);
  std::error_code error;
  result.command = fmt::format("the Triton warm-up compiles {}'s kernels per workload for sm_90a (triton {})",
                               solution.name, options.triton_version);
  if (fs::exists(entry.status())) {
    result.cached = true;
    result.ok = read_file(entry.status()).starts_with("ok");
    result.log = read_file(entry.log());
    result.library = entry.dir / "triton.json";
    return result;
  }
  fs::path temp = make_temp_dir(options.cache_dir, result.hash);
  fs::permissions(temp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec, error);
  fs::create_directory(temp / "src");
  fs::create_directory(temp / "triton-cache");
  std::vector<std::string> modules;
  for (const auto& [name, bytes] : files) {
    write_file(temp / "src" / name, bytes);
    modules.push_back(fs::path(name).stem().string());
  }
  write_file(temp / "triton.json", fmt::format("{{\"entry\": \"{}\", \"modules\": [\"{}\"]}}\n", solution.entry,
                                               fmt::join(modules, "\", \"")));
  result.log = fmt::format("triton {}: {} module(s), entry {}.py\n", options.triton_version, modules.size(), solution.entry);
  write_file(temp / "build.log", result.log);
  write_file(temp / "status", "ok\n");
  fs::rename(temp, entry.dir, error);
  if (error) {
    fs::remove_all(temp, error);
    if (!fs::exists(entry.status())) fail("cannot store the build in {}", entry.dir.string());
  }
  result.ok = true;
  result.library = entry.dir / "triton.json";
  return result;
}

}  // namespace

std::string_view name_of(Language language) {
  switch (language) {
    case Language::cuda: return "cuda";
    case Language::cpp: return "cpp";
    case Language::triton: return "triton";
  }
  return "cpp";
}

fs::path cutlass_include_dir(const fs::path& root) {
  const char* chosen = std::getenv("D2K_CUTLASS_DIR");
  fs::path dir = chosen && *chosen ? fs::path(chosen) : root / ".deps" / "cutlass" / "include";
  std::error_code error;
  if (!fs::is_directory(dir / "cute", error) || !fs::is_directory(dir / "cutlass", error)) return {};
  // The real path: the sandbox binds what the compiler is told to read.
  fs::path real = fs::canonical(dir, error);
  return error ? fs::path() : real;
}

Solution load_solution(const fs::path& path) {
  std::error_code error;
  fs::path full = fs::absolute(path, error).lexically_normal();
  if (full.filename().empty()) full = full.parent_path();  // "dir/" names the folder "dir"
  if (!fs::exists(full, error)) fail("solution {} does not exist", path.string());

  Solution solution;
  if (fs::is_regular_file(full)) {
    std::optional<Language> language = language_of_source(full);
    if (!language) fail("solution {} is not a .cu, .cpp/.cc or .py file", path.string());
    solution.name = full.stem().string();
    solution.dir = full.parent_path();
    solution.language = *language;
    solution.sources = {full};
    if (*language == Language::triton) solution.entry = full.stem().string();
    return solution;
  }
  if (!fs::is_directory(full)) fail("solution {} is neither a file nor a folder", path.string());

  solution.name = full.filename().string();
  solution.dir = full;
  std::map<Language, std::vector<fs::path>> found;
  for (const auto& item : fs::directory_iterator(full)) {
    if (!item.is_regular_file()) continue;
    if (std::optional<Language> language = language_of_source(item.path())) found[*language].push_back(item.path());
    if (is_header(item.path())) solution.headers.push_back(item.path());
  }
  // .py files beside C++ or CUDA sources are not the solution's (an agent's scratch scripts): a folder is
  // a Triton solution when .py files are its only sources.
  if (found.size() > 1) found.erase(Language::triton);
  if (found.size() > 1) {
    fail("solution folder {} holds both .cu and .cpp/.cc files; a solution is one language", path.string());
  }
  if (found.empty()) fail("solution folder {} holds no .cu, .cpp/.cc or .py file", path.string());
  solution.language = found.begin()->first;
  solution.sources = found.begin()->second;
  std::sort(solution.sources.begin(), solution.sources.end());
  std::sort(solution.headers.begin(), solution.headers.end());
  if (solution.language == Language::triton) {
    for (const auto& source : solution.sources)
      if (source.filename() == "solution.py") solution.entry = "solution";
    if (solution.entry.empty() && solution.sources.size() == 1) solution.entry = solution.sources.front().stem().string();
    if (solution.entry.empty())
      fail("Triton solution folder {} holds several .py files and no solution.py: name the module that defines launch "
           "solution.py", path.string());
    solution.headers.clear();  // a Triton solution has none; its other .py files are modules it may import
  }
  return solution;
}

BuildResult build_solution(const Solution& solution, const BuildOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  BuildResult result;
  std::vector<std::string> argv = command_template(solution, options);
  result.command = shell_line(concrete(argv, options));

  Device wanted = solution.language == Language::cpp ? Device::cpu : Device::cuda;
  if (solution.language == Language::triton && options.device != Device::cuda) {
    result.log = fmt::format("solution {} is Triton code: the {} device has no Triton backend (Triton solutions run on the "
                             "cuda device only; docs/abi.md)", solution.name, name_of(options.device));
    result.command = "(no Triton backend on this device)";
    result.seconds = elapsed();
    return result;
  }
  if (solution.language == Language::triton) {
    if (options.triton_version.empty()) {
      result.log = fmt::format("solution {} is Triton code, and this machine has no usable Triton: {}", solution.name,
                               options.triton_missing.empty() ? "this command does not run Triton solutions (d2k eval does, on the cuda device)"
                                                              : options.triton_missing);
      result.command = "(no Triton)";
      result.seconds = elapsed();
      return result;
    }
    result = build_triton(solution, options, result);
    result.seconds = elapsed();
    return result;
  }
  if (options.device != wanted) {
    result.log =
        fmt::format("solution {} is {} code, which runs on the {} device, not on the {} device",
                    solution.name, name_of(solution.language), name_of(wanted), name_of(options.device));
    result.seconds = elapsed();
    return result;
  }

  fs::path abi_header = options.abi_include_dir / "d2k" / "solution.h";
  if (!fs::is_regular_file(abi_header)) fail("the ABI header {} does not exist", abi_header.string());

  // Read every file once: the bytes hashed are the bytes compiled.
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& list : {solution.sources, solution.headers}) {
    for (const auto& file : list) files.emplace_back(file.filename().string(), read_file(file));
  }
  std::string compiler = argv.front();
  std::string version = compiler_version(compiler);

  Sha256 hash;
  add_field(hash, "abi", read_file(abi_header));
  add_field(hash, "command", shell_line(argv));
  add_field(hash, "compiler", version);
  // The command names the CUTLASS folder by placeholder: its release must change the key.
  if (solution.language == Language::cuda && !options.cutlass_include_dir.empty()) {
    fs::path version_h = options.cutlass_include_dir / "cutlass" / "version.h";
    if (!fs::is_regular_file(version_h)) fail("the CUTLASS headers {} have no cutlass/version.h", options.cutlass_include_dir.string());
    add_field(hash, "cutlass", read_file(version_h));
  }
  const Entry entry = close_key(hash, files, options, result);
  std::error_code error;
  result.command = fmt::format("cd {} && {}", (entry.dir / "src").string(), result.command);
  if (fs::exists(entry.status())) {
    result.cached = true;
    result = from_cache(entry, result);
    result.seconds = elapsed();
    return result;
  }

  fs::path temp = make_temp_dir(options.cache_dir, result.hash);
  // mkdtemp's 0700 would keep a sandboxed worker, which runs as another uid, out of the entry.
  fs::permissions(temp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec, error);
  fs::create_directory(temp / "src");
  for (const auto& [name, bytes] : files) write_file(temp / "src" / name, bytes);

  ProcessSpec spec;
  spec.argv = concrete(argv, options);
  spec.cwd = temp / "src";
  spec.timeout_seconds = options.timeout_seconds;
  if (options.sandbox)
    spec.sandbox = build_sandbox(*options.sandbox, compiler, options.abi_include_dir, temp, options.timeout_seconds,
                                 solution.language == Language::cuda ? options.cutlass_include_dir : fs::path());
  ProcessResult compile = run_process(spec);
  // Only a compiler that ran to its end says something stable about the sources; a timeout, a kill
  // or a missing compiler may not repeat, so they are not cached.
  bool deterministic = compile.end == ProcessResult::End::exited;
  result.ok = compile.ok() && fs::exists(temp / "solution.so");
  result.timed_out = compile.end == ProcessResult::End::timed_out;
  result.log = compile.output;
  if (!compile.ok()) {
    result.log += fmt::format("{}{} {}\n", result.log.empty() || result.log.ends_with('\n') ? "" : "\n",
                              compiler, compile.describe());
  }
  if (!deterministic) {
    fs::remove_all(temp, error);
    result.seconds = elapsed();
    return result;
  }

  write_file(temp / "build.log", result.log);
  write_file(temp / "status", result.ok ? "ok\n" : "failed\n");
  fs::rename(temp, entry.dir, error);
  if (error) {
    // Another process finished the same build first; its entry is as good as ours.
    fs::remove_all(temp, error);
    if (!fs::exists(entry.status())) fail("cannot store the build in {}", entry.dir.string());
  }
  result.library = result.ok ? entry.library() : fs::path();
  result.seconds = elapsed();
  return result;
}

}  // namespace d2k
