#include "runner/triton.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "core/json.hpp"
#include "runner/process.hpp"
#include "triton/d2k_triton_source.hpp"

namespace fs = std::filesystem;

namespace d2k {
namespace {

// Asks the interpreter where it and Triton are. Runs trusted code only (the interpreter and Triton's
// import), outside any sandbox.
constexpr std::string_view kProbe = R"(
import json, os, sys, sysconfig
site = sys.argv[1]
if site:
    sys.path.insert(0, site)
out = {"python": os.path.realpath(sys.executable), "home": sys.base_prefix,
       "python_version": ".".join(map(str, sys.version_info[:3]))}
libdir = sysconfig.get_config_var("LIBDIR") or ""
for name in (sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")):
    if name and ".so" in name and os.path.exists(os.path.join(libdir, name)):
        out["libpython"] = os.path.realpath(os.path.join(libdir, name))
        break
try:
    import triton
    out["version"] = triton.__version__
    out["site"] = os.path.dirname(os.path.dirname(os.path.realpath(triton.__file__)))
except Exception as error:
    out["error"] = f"{type(error).__name__}: {error}"
print("D2K-PROBE " + json.dumps(out))
)";

std::optional<nlohmann::json> marked_line(const std::string& output, std::string_view mark) {
  const auto at = output.rfind(mark);
  if (at == std::string::npos) return std::nullopt;
  const auto end = output.find('\n', at);
  try {
    return nlohmann::json::parse(output.substr(at + mark.size(), end == std::string::npos ? end : end - at - mark.size()));
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

void write_text(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) fail("cannot write {}", path.string());
}

}  // namespace

std::optional<TritonSetup> find_triton(const fs::path& root, std::string& why) {
  static std::mutex mutex;
  static std::map<fs::path, std::pair<std::optional<TritonSetup>, std::string>> found;
  std::lock_guard lock(mutex);
  if (auto known = found.find(root); known != found.end()) {
    why = known->second.second;
    return known->second.first;
  }
  auto remember = [&](std::optional<TritonSetup> setup, std::string reason) {
    found[root] = {setup, reason};
    why = reason;
    return setup;
  };
  const char* python_env = std::getenv("D2K_PYTHON");
  const std::string python = python_env && *python_env ? python_env : "python3";
  const char* site_env = std::getenv("D2K_TRITON_SITE");
  std::string site = site_env && *site_env ? site_env : "";
  if (site.empty() && fs::is_directory(root / ".deps" / "triton" / "triton")) site = (root / ".deps" / "triton").string();
  ProcessSpec spec;
  // -I: no PYTHONPATH, no user site; the interpreter's own site-packages stay (a venv's Triton).
  spec.argv = {python, "-I", "-c", std::string(kProbe), site};
  spec.timeout_seconds = 120;
  const ProcessResult result = run_process(spec);
  const auto probe = marked_line(result.output, "D2K-PROBE ");
  if (!result.ok() || !probe)
    return remember(std::nullopt, fmt::format("{} could not be asked where Triton is ({}): {}", python, result.describe(),
                                              result.output.substr(0, 400)));
  TritonSetup setup;
  setup.python = probe->value("python", "");
  setup.home = probe->value("home", "");
  setup.libpython = probe->value("libpython", "");
  setup.python_version = probe->value("python_version", "");
  if (probe->contains("error"))
    return remember(std::nullopt, fmt::format("{} {} cannot import triton{}: {} (scripts/setup installs triton=={} into "
                                              ".deps/triton)", python, setup.python_version,
                                              site.empty() ? "" : " from " + site, probe->value("error", ""), kTritonVersion));
  setup.version = probe->value("version", "");
  setup.site = probe->value("site", "");
  if (setup.version != kTritonVersion)
    return remember(std::nullopt, fmt::format("Triton {} found in {}, but d2k pins triton=={} (the GPU machine's PyTorch "
                                              "2.11.0 ships it)", setup.version, setup.site.string(), kTritonVersion));
  return remember(setup, "");
}

std::vector<fs::path> triton_read_paths(const TritonSetup& setup) {
  std::vector<fs::path> paths;
  if (!setup.home.string().starts_with("/usr")) paths.push_back(setup.home);
  paths.push_back(setup.site / "triton");
  return paths;
}

WirePython wire_python(const TritonSetup& setup, const WarmupSpec& spec) {
  return WirePython{.library = setup.libpython.string(),
                    .home = setup.home.string(),
                    .site = setup.site.string(),
                    .cache = spec.cache_dir.string(),
                    .entry = spec.entry,
                    .modules = spec.modules,
                    .capability = kTritonCapability};
}

WarmupResult triton_warmup(const TritonSetup& setup, const WarmupSpec& spec) {
  WarmupResult result;
  std::error_code error;
  fs::create_directories(spec.cache_dir, error);
  if (error) fail("cannot create the Triton cache {}: {}", spec.cache_dir.string(), error.message());
  fs::create_directories(spec.scratch_dir, error);
  if (error) fail("cannot create the warm-up's folder {}: {}", spec.scratch_dir.string(), error.message());

  nlohmann::json tensors = nlohmann::json::array(), outputs = nlohmann::json::array(), scalars = nlohmann::json::array();
  auto add = [&](const WireTensor& t) {
    tensors.push_back({{"name", t.name}, {"dtype", static_cast<int>(to_abi(t.dtype))}, {"shape", t.shape}, {"strides", t.strides}});
  };
  for (const auto& input : spec.inputs) add(input);
  for (const auto& output : spec.outputs) {
    int index = -1;
    for (std::size_t i = 0; i < spec.inputs.size(); ++i)
      if (output.inplace && spec.inputs[i].name == output.name) index = static_cast<int>(i);
    if (index < 0) {
      index = static_cast<int>(tensors.size());
      add(output);
    }
    outputs.push_back(index);
  }
  for (const auto& scalar : spec.scalars) scalars.push_back({{"name", scalar.name}, {"is_int", scalar.is_int}, {"value", scalar.value}});
  const nlohmann::json request = {{"capability", kTritonCapability}, {"triton_site", setup.site.string()},
                                  {"cache_dir", spec.cache_dir.string()}, {"build_stubs", spec.build_stubs},
                                  {"src_dir", spec.src_dir.string()}, {"entry", spec.entry}, {"own", spec.modules},
                                  {"tensors", tensors}, {"outputs", outputs}, {"scalars", scalars}};
  write_text(spec.scratch_dir / "d2k_triton.py", kTritonRuntimeSource);
  write_text(spec.scratch_dir / "request.json", request.dump());

  ProcessSpec process;
  // -I -S: no environment variables of Python's, no site-packages: the runtime puts Triton's folder alone
  // on the path.
  process.argv = {setup.python.string(), "-I", "-S", (spec.scratch_dir / "d2k_triton.py").string(),
                  (spec.scratch_dir / "request.json").string()};
  process.cwd = spec.scratch_dir;
  process.timeout_seconds = spec.timeout_seconds;
  if (spec.sandbox) {
    Sandbox sandbox = build_sandbox(*spec.sandbox, setup.python, spec.src_dir, spec.scratch_dir, spec.timeout_seconds);
    for (const auto& path : triton_read_paths(setup)) sandbox.read.push_back(path);
    sandbox.write.push_back(spec.cache_dir);
    process.sandbox = sandbox;
  }
  const ProcessResult ran = run_process(process);
  result.log = ran.output;
  result.seconds = ran.seconds;
  const auto answer = marked_line(ran.output, "D2K-WARMUP ");
  if (!answer) {
    result.kind = ran.end == ProcessResult::End::timed_out ? "compile" : "harness";
    result.message = fmt::format("the Triton warm-up {} without an answer", ran.describe());
    return result;
  }
  result.ok = answer->value("ok", false);
  result.kind = answer->value("kind", "");
  result.message = answer->value("message", "");
  if (answer->contains("kernels")) result.kernels = answer->at("kernels");
  return result;
}

}  // namespace d2k
