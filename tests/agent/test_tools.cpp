#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "agent/tools.hpp"
#include "core/error.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"
#include "core/task_loader.hpp"
#include "runner/triton.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace d2k::agent;

namespace {

struct Box {
  fs::path dir;
  std::unique_ptr<ToolBox> box;
  explicit Box(Condition condition = Condition::none, d2k::Language language = d2k::Language::cuda) {
    dir = fs::temp_directory_path() / ("d2k-agent-tools-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    ToolEnv env;
    env.condition = condition;
    env.language = language;
    env.run_dir = dir;
    box = std::make_unique<ToolBox>(env);
  }
  ~Box() { fs::remove_all(dir); }
  ToolOutcome run(const std::string& name, const std::string& args) { return box->run(name, args, 0); }
};

}  // namespace

TEST(Tools, SpecsAreObjectSchemasWithTheirRequiredArguments) {
  for (auto condition : {Condition::none, Condition::design_only}) {
    for (const auto& spec : tool_specs(condition)) {
      EXPECT_EQ(spec.parameters.at("type"), "object") << spec.name;
      for (const auto& required : spec.parameters.at("required"))
        EXPECT_TRUE(spec.parameters.at("properties").contains(required.get<std::string>())) << spec.name;
      EXPECT_FALSE(spec.description.empty());
    }
  }
  EXPECT_EQ(tool_specs(Condition::L1_L2).size(), 9u);
}

TEST(Tools, MalformedCallsAreFormatErrorsWithAReason) {
  Box b;
  auto unknown = b.run("rm_rf", "{}");
  EXPECT_TRUE(unknown.is_error && unknown.format_error);
  EXPECT_NE(unknown.result.dump().find("the tools are: list_files"), std::string::npos);
  auto invalid = b.run("read_file", "{\"path\": ");
  EXPECT_TRUE(invalid.format_error);
  EXPECT_NE(invalid.result.at("error").get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_TRUE(b.run("read_file", "\"TASK.md\"").format_error);
  EXPECT_TRUE(b.run("write_file", R"({"path": "a.cpp"})").format_error);
  EXPECT_TRUE(b.run("write_file", R"({"path": "a.cpp", "content": 5})").format_error);
  EXPECT_TRUE(b.run("read_file", R"({"path": "a.cpp", "start_line": "one"})").format_error);
  // A tool that exists but fails on what it was given is an error, not a format error.
  auto missing = b.run("read_file", R"({"path": "nope.cpp"})");
  EXPECT_TRUE(missing.is_error);
  EXPECT_FALSE(missing.format_error);
  auto outside = b.run("write_file", R"({"path": "../x.cpp", "content": "x"})");
  EXPECT_TRUE(outside.is_error);
  EXPECT_FALSE(fs::exists(b.dir / "x.cpp"));
  // Empty arguments are an empty object.
  EXPECT_FALSE(b.run("list_files", "").is_error);
}

TEST(Tools, DesignOnlyHasNoCodeTools) {
  Box b(Condition::design_only);
  EXPECT_TRUE(b.run("compile", "{}").format_error);
  auto submit = b.run("submit", "{}");
  EXPECT_TRUE(submit.is_error) << "no design.md yet";
  EXPECT_FALSE(submit.submitted);
  EXPECT_FALSE(b.run("write_file", R"({"path": "design.md", "content": "## L1 algorithm\nfuse"})").is_error);
  EXPECT_TRUE(b.run("submit", "{}").submitted);
}

TEST(Tools, FileToolsRoundTrip) {
  Box b;
  EXPECT_FALSE(b.run("write_file", json{{"path", "k.cpp"}, {"content", "a\nb\nc\n"}}.dump()).is_error);
  auto edit = b.run("edit_file", json{{"path", "k.cpp"}, {"old_text", "b\n"}, {"new_text", "B\nB2\n"}}.dump());
  EXPECT_FALSE(edit.is_error) << edit.result.dump();
  EXPECT_EQ(edit.result.at("line"), 2);
  auto read = b.run("read_file", json{{"path", "k.cpp"}, {"start_line", 2}, {"max_lines", 2}}.dump());
  EXPECT_EQ(read.result.at("content"), "B\nB2\n");
  EXPECT_EQ(read.result.at("total_lines"), 4);
  EXPECT_TRUE(read.result.at("truncated").get<bool>());
  auto list = b.run("list_files", "{}");
  EXPECT_EQ(list.result.at("files").at(0).at("path"), "k.cpp");
  EXPECT_EQ(b.box->mutated_file("edit_file", R"({"path": "k.cpp"})"), fs::canonical(b.dir / "workspace") / "k.cpp");
  EXPECT_FALSE(b.box->mutated_file("read_file", R"({"path": "k.cpp"})"));
  EXPECT_FALSE(b.box->mutated_file("write_file", "{bad"));
}

TEST(Tools, FolderPathsAreToolErrorsTheModelSees) {
  Box b;
  EXPECT_FALSE(b.run("write_file", json{{"path", "sub/k.cpp"}, {"content", "a\n"}}.dump()).is_error);
  const std::vector<std::pair<std::string, json>> calls = {
      {"write_file", {{"path", "."}, {"content", "x"}}},
      {"write_file", {{"path", "sub"}, {"content", "x"}}},
      {"edit_file", {{"path", "."}, {"old_text", "a"}, {"new_text", "b"}}},
      {"edit_file", {{"path", "sub"}, {"old_text", "a"}, {"new_text", "b"}}},
  };
  for (const auto& [name, args] : calls) {
    const auto outcome = b.run(name, args.dump());
    EXPECT_TRUE(outcome.is_error) << name << " " << outcome.result.dump();
    EXPECT_FALSE(outcome.format_error);
    const auto message = outcome.result.at("error").get<std::string>();
    EXPECT_NE(message.find("'" + args.at("path").get<std::string>() + "' is a folder"), std::string::npos) << message;
  }
}

TEST(Tools, ReadFileOfALongLineReturnsItsHeadWithANote) {
  Box b;
  const std::string line(kReadBytes + 1000, 'z');
  EXPECT_FALSE(b.run("write_file", json{{"path", "long.txt"}, {"content", line + "\nnext\n"}}.dump()).is_error);
  const auto read = b.run("read_file", json{{"path", "long.txt"}}.dump());
  ASSERT_FALSE(read.is_error) << read.result.dump();
  EXPECT_EQ(read.result.at("content").get<std::string>(), line.substr(0, kReadBytes));
  EXPECT_EQ(read.result.at("last_line"), 1);
  EXPECT_TRUE(read.result.at("truncated").get<bool>());
  EXPECT_NE(read.result.at("note").get<std::string>().find("line 1 is"), std::string::npos) << read.result.dump();
}

TEST(Tools, ListFilesShowsASymlinkAsALinkWithoutItsTarget) {
  Box b;
  const auto outside = b.dir / "outside.txt";
  EXPECT_FALSE(b.run("write_file", json{{"path", "k.cpp"}, {"content", "a\n"}}.dump()).is_error);
  { std::ofstream(outside) << "0123456789"; }
  fs::create_symlink(outside, b.dir / "workspace" / "link");
  const auto list = b.run("list_files", "{}");
  ASSERT_FALSE(list.is_error) << list.result.dump();
  const auto files = list.result.at("files");
  ASSERT_EQ(files.size(), 2u) << files.dump();
  EXPECT_EQ(files.at(0), (json{{"path", "k.cpp"}, {"bytes", 2}}));
  EXPECT_EQ(files.at(1), (json{{"path", "link"}, {"kind", "symlink"}}));
}

// Issue 18, item 2: the compile tool builds in the evaluator's sandbox. A solution that includes host
// files (here the task's task.toml, which names the hidden workloads, and a secret beside the run)
// fails to compile and the log shows none of their content.
TEST(Tools, CompileRunsInTheSandboxAndCannotShowHostFiles) {
  const fs::path root = D2K_ROOT_DIR;
  d2k::EvalEnvironment environment;
  environment.device = d2k::Device::cpu;
  environment.root = root;
  try {
    d2k::EnvironmentOptions options;
    options.sandbox = "strict";
    options.bin_dir = fs::path(D2K_SANDBOX_PATH).parent_path();
    environment.sandbox = d2k::probe_sandbox(d2k::Device::cpu, options);
  } catch (const d2k::Error& e) {
    GTEST_SKIP() << "this machine cannot run the strict sandbox, so a sandboxed build cannot be tested: " << e.what();
  }
  d2k::EvalSettings eval;
  eval.build_timeout_seconds = 60;
  Box b;
  environment.build_cache = b.dir / "builds";
  ToolEnv env;
  env.run_dir = b.dir;
  env.environment = &environment;
  env.eval = &eval;
  ToolBox box(env);
  const auto secret = b.dir / "secret.h";
  const std::string token = "d2k_secret_" + std::to_string(::getpid()) + "_token";
  { std::ofstream(secret) << token << "\n"; }
  const auto task_toml = root / "tasks" / "moe" / "topk_softmax" / "task.toml";
  ASSERT_TRUE(fs::exists(task_toml));
  const std::string hidden = "olmoe-1b-7b-T999";  // a hidden workload named in task.toml
  const std::string source = "#include \"" + secret.string() + "\"\n#include \"" + task_toml.string() + "\"\nint x;\n";
  ASSERT_FALSE(box.run("write_file", json{{"path", "cheat.cpp"}, {"content", source}}.dump(), 0).is_error);
  const auto compiled = box.run("compile", "{}", 1);
  EXPECT_TRUE(compiled.is_error);
  EXPECT_FALSE(compiled.result.at("ok").get<bool>());
  const auto log = compiled.result.at("log").get<std::string>();
  EXPECT_EQ(log.find(token), std::string::npos) << log;
  EXPECT_EQ(log.find(hidden), std::string::npos) << log;
  EXPECT_NE(log.find("d2k-sandbox: "), std::string::npos) << "the build ran outside the sandbox: " << log;
  // The control: an honest solution builds in the same sandbox.
  const std::string honest = "#include <cmath>\n#include \"d2k/solution.h\"\n"
                             "extern \"C\" int d2k_run(const d2k_call*) { return int(std::sqrt(0.0)); }\n";
  ASSERT_FALSE(box.run("write_file", json{{"path", "cheat.cpp"}, {"content", honest}}.dump(), 2).is_error);
  const auto honest_build = box.run("compile", "{}", 3);
  EXPECT_TRUE(honest_build.result.at("ok").get<bool>()) << honest_build.result.dump();
}

TEST(Tools, SeedsDifferPerCallAndRepeat) {
  EXPECT_EQ(derive_seed(7, 3), derive_seed(7, 3));
  EXPECT_NE(derive_seed(7, 3), derive_seed(7, 4));
  EXPECT_NE(derive_seed(7, 3), derive_seed(8, 3));
}


TEST(Tools, TritonSpecsNameTheAheadOfTimeCompile) {
  const auto describe = [](d2k::Language language, const std::string& name) {
    for (const auto& spec : tool_specs(Condition::none, language))
      if (spec.name == name) return spec.description;
    return std::string();
  };
  EXPECT_NE(describe(d2k::Language::triton, "compile").find("solution.py"), std::string::npos);
  EXPECT_NE(describe(d2k::Language::triton, "compile").find("compiled for sm_90a"), std::string::npos);
  EXPECT_EQ(describe(d2k::Language::cuda, "compile").find("Triton"), std::string::npos);
  EXPECT_EQ(tool_specs(Condition::none, d2k::Language::triton).size(), tool_specs(Condition::none).size());
}

TEST(Tools, TheSolutionMustBeInTheRunsLanguage) {
  const auto error_of = [](const ToolOutcome& outcome) {
    EXPECT_TRUE(outcome.is_error) << outcome.result.dump();
    EXPECT_FALSE(outcome.submitted);
    EXPECT_FALSE(outcome.format_error);
    return outcome.result.value("error", std::string());
  };
  {  // A Triton run whose workspace holds CUDA: every tool that takes the solution refuses it, naming both.
    Box b(Condition::none, d2k::Language::triton);
    EXPECT_NE(error_of(b.run("compile", "{}")).find("write solution.py"), std::string::npos) << "an empty workspace";
    ASSERT_FALSE(b.run("write_file", json{{"path", "solution.py"}, {"content", "def launch(x, y, workspace): pass\n"}}.dump()).is_error);
    ASSERT_FALSE(b.run("write_file", json{{"path", "k.cu"}, {"content", "// cuda\n"}}.dump()).is_error);
    for (const char* tool : {"compile", "check", "benchmark", "submit"}) {
      const auto message = error_of(b.run(tool, "{}"));
      EXPECT_NE(message.find("holds cuda sources (k.cu), but this run's language is Triton"), std::string::npos) << tool << ": " << message;
    }
    // Alone, solution.py is the run's solution.
    fs::remove(b.dir / "workspace" / "k.cu");
    const auto submit = b.run("submit", "{}");
    EXPECT_TRUE(submit.submitted) << submit.result.dump();
    EXPECT_EQ(submit.result.at("submitted"), json::array({"solution.py"}));
  }
  {  // A cuda run whose workspace holds only Python.
    Box b(Condition::none, d2k::Language::cuda);
    ASSERT_FALSE(b.run("write_file", json{{"path", "solution.py"}, {"content", "def launch(x, y, workspace): pass\n"}}.dump()).is_error);
    for (const char* tool : {"compile", "check", "benchmark", "submit"}) {
      const auto message = error_of(b.run(tool, "{}"));
      EXPECT_NE(message.find("the workspace's solution is Triton (solution.py), but this run's language is cuda"),
                std::string::npos) << tool << ": " << message;
    }
    // Scratch Python beside the CUDA source is not the solution: the run's language decides nothing there.
    ASSERT_FALSE(b.run("write_file", json{{"path", "k.cu"}, {"content", "// cuda\n"}}.dump()).is_error);
    EXPECT_TRUE(b.run("submit", "{}").submitted);
  }
}

// compile, for a Triton run on the cuda device: the warm-up compiles the kernels for sm_90a per published
// workload, without a GPU (Triton's C launcher stubs link against the toolkit's libcuda stub here).
TEST(Tools, TritonCompileIsTheWarmUpsAheadOfTimeCompilePerWorkload) {
  const fs::path root = D2K_ROOT_DIR;
  const fs::path cuda_stubs = "/usr/local/cuda/lib64/stubs";
  std::string why;
  if (!d2k::find_triton(root, why)) GTEST_SKIP() << "no pinned Triton (scripts/setup installs it): " << why;
  if (!fs::exists(cuda_stubs / "libcuda.so")) GTEST_SKIP() << "no CUDA toolkit stubs in " << cuda_stubs;
  Box b(Condition::none, d2k::Language::triton);
  const fs::path stubs = b.dir / "stubs";
  fs::create_directories(stubs);
  fs::create_symlink(cuda_stubs / "libcuda.so", stubs / "libcuda.so.1");
  ::setenv("TRITON_LIBCUDA_PATH", stubs.c_str(), 1);
  const char* old_path = std::getenv("LD_LIBRARY_PATH");
  const std::string saved = old_path ? old_path : "";
  ::setenv("LD_LIBRARY_PATH", stubs.c_str(), 1);

  d2k::EvalEnvironment environment;
  environment.device = d2k::Device::cuda;  // compile needs no GPU: nothing is launched
  environment.root = root;
  environment.build_cache = b.dir / "builds";
  environment.scratch_dir = b.dir / "scratch";
  fs::create_directories(environment.scratch_dir);
  d2k::EvalSettings eval;
  eval.build_timeout_seconds = 300;
  eval.workloads = {"llama3-8b-T1", "qwen2.5-7b-T37"};
  d2k::Task task = d2k::load_task(root / "tasks", std::string("norm/fused_add_rmsnorm"));
  ToolEnv env;
  env.task = &task;
  env.language = d2k::Language::triton;
  env.run_dir = b.dir / "run";
  env.environment = &environment;
  env.eval = &eval;
  ToolBox box(env);
  const auto source = read_whole_file(root / "tasks/norm/fused_add_rmsnorm/solution/triton/fused_add_rmsnorm.py");
  ASSERT_TRUE(source);
  ASSERT_FALSE(box.run("write_file", json{{"path", "solution.py"}, {"content", *source}}.dump(), 0).is_error);
  const auto compiled = box.run("compile", "{}", 1);
  EXPECT_FALSE(compiled.is_error) << compiled.result.dump(2);
  if (std::getenv("D2K_TEST_SHOW")) std::cerr << compiled.result.dump(2) << "\n";
  ASSERT_TRUE(compiled.result.contains("workloads")) << compiled.result.dump(2);
  ASSERT_EQ(compiled.result.at("workloads").size(), 2u);
  for (const auto& w : compiled.result.at("workloads")) {
    EXPECT_TRUE(w.at("ok").get<bool>()) << w.dump();
    EXPECT_FALSE(w.at("kernels").empty()) << w.dump();
  }
  // A kernel Triton cannot compile: the first workload's error, with Triton's message.
  std::string broken = *source;
  const auto at = broken.find("tl.store(");
  ASSERT_NE(at, std::string::npos);
  broken.insert(at, "tl.no_such_builtin()\n    ");
  ASSERT_FALSE(box.run("write_file", json{{"path", "solution.py"}, {"content", broken}}.dump(), 2).is_error);
  const auto failed = box.run("compile", "{}", 3);
  EXPECT_TRUE(failed.is_error);
  ASSERT_EQ(failed.result.at("workloads").size(), 1u) << failed.result.dump(2);
  EXPECT_EQ(failed.result.at("workloads").at(0).at("error"), "compile") << failed.result.dump(2);
  EXPECT_NE(failed.result.dump().find("no_such_builtin"), std::string::npos) << failed.result.dump(2);
  // A library import: refused, as check would reject it.
  ASSERT_FALSE(box.run("write_file", json{{"path", "solution.py"}, {"content", "import torch\n" + *source}}.dump(), 4).is_error);
  const auto refused = box.run("compile", "{}", 5);
  EXPECT_TRUE(refused.is_error);
  EXPECT_EQ(refused.result.at("workloads").at(0).at("error"), "refused") << refused.result.dump(2);
  if (std::getenv("D2K_TEST_SHOW")) std::cerr << failed.result.dump(2) << "\n" << refused.result.dump(2) << "\n";
  if (old_path) ::setenv("LD_LIBRARY_PATH", saved.c_str(), 1);
  else ::unsetenv("LD_LIBRARY_PATH");
  ::unsetenv("TRITON_LIBCUDA_PATH");
}
