#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/tools.hpp"
#include "core/error.hpp"
#include "eval/environment.hpp"
#include "eval/evaluator.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace d2k::agent;

namespace {

struct Box {
  fs::path dir;
  std::unique_ptr<ToolBox> box;
  explicit Box(Condition condition = Condition::none) {
    dir = fs::temp_directory_path() / ("d2k-agent-tools-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    ToolEnv env;
    env.condition = condition;
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

