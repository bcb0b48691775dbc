// plan.toml: the runs it expands to, paired seeds, and errors that name the file, line, field and value.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "campaign/plan.hpp"
#include "campaign/runner.hpp"
#include "core/error.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;

fs::path write_plan(const std::string& name, const std::string& text) {
  const auto dir = fs::temp_directory_path() / ("d2k_test_plan_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto file = dir / name;
  std::ofstream(file) << text;
  return file;
}

constexpr const char* kPlan = R"toml([campaign]
name = "laptop"
seed = 7
models_file = "models.toml"
models = ["a", "b"]
tasks = ["act/silu_and_mul", "moe/topk_softmax"]
conditions = ["none", "L1", "L1+L2+L3", "design-only"]
repeats = 2
device = "cpu"

[workloads]
"moe/topk_softmax" = ["qwen3-30b-T1"]

[budget]
turns = 12
max_cost_usd = 1.5

[timing]
max_seconds = 0.05
min_samples = 2

[concurrency]
runs = 6
per_endpoint = 3
)toml";

std::string error_of(const std::string& text) {
  try {
    load_plan(write_plan("bad.toml", text));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Plan, ExpandsToPairedRuns) {
  const auto plan = load_plan(write_plan("plan.toml", kPlan));
  EXPECT_EQ(plan.name, "laptop");
  EXPECT_EQ(plan.models_file, plan.file.parent_path() / "models.toml");
  EXPECT_EQ(plan.budget.max_turns, 12);
  EXPECT_EQ(*plan.budget.max_cost_usd, 1.5);
  EXPECT_EQ(plan.timing.min_samples, 2);
  EXPECT_EQ(plan.concurrent_runs, 6);
  EXPECT_EQ(plan.per_endpoint, 3);
  EXPECT_EQ(plan.workloads.at("moe/topk_softmax"), std::vector<std::string>{"qwen3-30b-T1"});
  const auto runs = plan.runs();
  ASSERT_EQ(runs.size(), 2u * 2 * 4 * 2);
  EXPECT_EQ(runs[0].key, "a/act/silu_and_mul/none/0");
  EXPECT_EQ(runs[1].key, "a/act/silu_and_mul/none/1");
  // Paired arms share the seed: every condition and every model of a (task, repeat); repeats and tasks differ.
  for (const auto& r : runs) EXPECT_EQ(r.seed, paired_seed(7, r.task, r.repeat)) << r.key;
  EXPECT_NE(paired_seed(7, "act/silu_and_mul", 0), paired_seed(7, "act/silu_and_mul", 1));
  EXPECT_NE(paired_seed(7, "act/silu_and_mul", 0), paired_seed(7, "moe/topk_softmax", 0));
  EXPECT_NE(paired_seed(7, "act/silu_and_mul", 0), paired_seed(8, "act/silu_and_mul", 0));
  EXPECT_EQ(folder_of("a/act/silu_and_mul/L1+L2/0"), "a__act__silu_and_mul__L1+L2__0");
}

TEST(Plan, ErrorsNameTheFileLineFieldAndValue) {
  std::string text = kPlan;
  auto with = [&](const std::string& from, const std::string& to) {
    auto t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  auto e = error_of(with("repeats = 2", "repeats = 0"));
  EXPECT_NE(e.find("bad.toml:8"), std::string::npos) << e;
  EXPECT_NE(e.find("campaign.repeats = 0: must be at least 1"), std::string::npos) << e;
  e = error_of(with("\"L1+L2+L3\"", "\"L4\""));
  EXPECT_NE(e.find("campaign.conditions[2] = \"L4\": unknown condition"), std::string::npos) << e;
  e = error_of(with("device = \"cpu\"", "device = \"tpu\""));
  EXPECT_NE(e.find("campaign.device = \"tpu\": must be auto, cuda or cpu"), std::string::npos) << e;
  e = error_of(with("turns = 12", "turn = 12"));
  EXPECT_NE(e.find("budget.turn"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  e = error_of(with("\"moe/topk_softmax\" = [", "\"attn/decode_mla\" = ["));
  EXPECT_NE(e.find("names a task that campaign.tasks does not list"), std::string::npos) << e;
  e = error_of(with("models = [\"a\", \"b\"]", "models = [\"a\", \"a\"]"));
  EXPECT_NE(e.find("campaign.models[1] = \"a\": is listed twice"), std::string::npos) << e;
  e = error_of(with("name = \"laptop\"\n", ""));
  EXPECT_NE(e.find("missing required key 'name'"), std::string::npos) << e;
  e = error_of(with("max_seconds = 0.05", "max_seconds = 0"));
  EXPECT_NE(e.find("timing.max_seconds = 0: must be above 0"), std::string::npos) << e;
  e = error_of("[campaign\nname = 1");
  EXPECT_NE(e.find("not TOML"), std::string::npos) << e;
}

// campaign.language: cuda or triton, as `d2k agent --language`; without it the device's default (triton on
// the cuda device, cuda = host C++ on the cpu device). Triton on the cpu device is refused naming both.
TEST(Plan, TheLanguageOfTheRuns) {
  std::string text = kPlan;
  auto with = [&](const std::string& from, const std::string& to) {
    auto t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  const auto plain = load_plan(write_plan("plain.toml", kPlan));
  EXPECT_FALSE(plain.language);
  EXPECT_TRUE(plan_json(plain).at("language").is_null());
  EXPECT_EQ(campaign_language(plain, Device::cpu), Language::cuda);
  EXPECT_EQ(campaign_language(plain, Device::cuda), Language::triton);

  const auto cuda = load_plan(write_plan("cuda.toml", with("device = \"cpu\"", "device = \"cpu\"\nlanguage = \"cuda\"")));
  EXPECT_EQ(cuda.language, Language::cuda);
  EXPECT_EQ(plan_json(cuda).at("language"), "cuda");
  EXPECT_EQ(campaign_language(cuda, Device::cuda), Language::cuda);  // given: not the device's default
  // The language is the campaign's, not a run's: the runs and their paired seeds are the same.
  EXPECT_EQ(cuda.runs(), plain.runs());

  // language before device in the table: still checked against it.
  const auto triton = load_plan(write_plan("triton.toml", with("device = \"cpu\"", "language = \"triton\"\ndevice = \"auto\"")));
  EXPECT_EQ(triton.language, Language::triton);
  EXPECT_EQ(campaign_language(triton, Device::cuda), Language::triton);
  try {  // auto resolved to the cpu device on this machine
    campaign_language(triton, Device::cpu);
    ADD_FAILURE() << "triton on the cpu device was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("triton.toml: campaign.language = \"triton\" with campaign.device = \"auto\", the cpu device on "
                        "this machine: the cpu device has no Triton backend"),
              std::string::npos)
        << what;
  }

  auto e = error_of(with("device = \"cpu\"", "device = \"cpu\"\nlanguage = \"triton\""));
  EXPECT_NE(e.find("bad.toml:10: campaign.language = \"triton\": the cpu device (campaign.device = \"cpu\") has no "
                   "Triton backend"),
            std::string::npos)
      << e;
  e = error_of(with("device = \"cpu\"", "language = \"triton\"\ndevice = \"cpu\""));
  EXPECT_NE(e.find("bad.toml:9: campaign.language = \"triton\": the cpu device"), std::string::npos) << e;
  e = error_of(with("device = \"cpu\"", "device = \"cpu\"\nlanguage = \"rust\""));
  EXPECT_NE(e.find("bad.toml:10: campaign.language = \"rust\": must be cuda or triton"), std::string::npos) << e;
  e = error_of(with("device = \"cpu\"", "device = \"cpu\"\nlanguage = \"cpp\""));  // the cpu solutions' id, not a run language
  EXPECT_NE(e.find("campaign.language = \"cpp\": must be cuda or triton"), std::string::npos) << e;
  e = error_of(with("device = \"cpu\"", "device = \"cpu\"\nlanguage = 1"));
  EXPECT_NE(e.find("campaign.language = 1: must be a non-empty string"), std::string::npos) << e;
}

// What a fresh run of the campaign is started with: the campaign's language reaches the agent's settings
// (run.json), with the plan's seed, budget and workloads.
TEST(Plan, APlannedRunGetsTheCampaignsLanguage) {
  const auto plan = load_plan(write_plan("plan.toml", kPlan));
  EvalEnvironment environment;
  environment.device = Device::cuda;
  environment.device_name = "H200";
  llm::ModelConfig model;
  const auto& run = plan.runs().at(3);
  for (const auto language : {Language::triton, Language::cuda}) {
    const auto settings = planned_run_settings(plan, run, language, environment, "/d2k", model);
    EXPECT_EQ(settings.language, language);
    EXPECT_EQ(settings.condition, run.condition);
    EXPECT_EQ(settings.seed, run.seed);
    EXPECT_EQ(settings.budget.max_turns, 12);
    EXPECT_EQ(settings.device, Device::cuda);
    EXPECT_EQ(settings.root, "/d2k");
  }
}

TEST(Plan, SlurmSettingsForSubmit) {
  EXPECT_FALSE(load_plan(write_plan("plain.toml", kPlan)).slurm.shards);  // none: submit asks for --shards
  const auto plan = load_plan(write_plan("slurm.toml", std::string(kPlan) + R"toml(
[slurm]
shards = 8
gpus_per_task = 2
cpus_per_task = 16
minutes_per_run = 45
partition = "h200"
account = "proj-42"
sbatch_options = ["--qos=high", "--exclusive"]
)toml"));
  EXPECT_EQ(*plan.slurm.shards, 8);
  EXPECT_EQ(*plan.slurm.gpus_per_task, 2);
  EXPECT_EQ(*plan.slurm.cpus_per_task, 16);
  EXPECT_EQ(*plan.slurm.minutes_per_run, 45.0);
  EXPECT_EQ(plan.slurm.partition, "h200");
  EXPECT_EQ(plan.slurm.account, "proj-42");
  EXPECT_EQ(plan.slurm.sbatch_options, (std::vector<std::string>{"--qos=high", "--exclusive"}));
  auto e = error_of(std::string(kPlan) + "\n[slurm]\nshards = 0\n");
  EXPECT_NE(e.find("slurm.shards = 0: must be at least 1"), std::string::npos) << e;
  e = error_of(std::string(kPlan) + "\n[slurm]\nsbatch_options = [\"qos=high\"]\n");
  EXPECT_NE(e.find("slurm.sbatch_options[0] = \"qos=high\": must be one long sbatch option"), std::string::npos) << e;
  e = error_of(std::string(kPlan) + "\n[slurm]\ngpus = 1\n");
  EXPECT_NE(e.find("slurm.gpus"), std::string::npos) << e;
  // The same text read from a store: the same plan, paths relative to the file it names.
  const auto again = parse_plan(plan.text, plan.file);
  EXPECT_EQ(again.runs(), plan.runs());
  EXPECT_EQ(again.models_file, plan.models_file);
}

}  // namespace
}  // namespace d2k::campaign
