// The sbatch script of `d2k campaign submit --slurm`: its directives, its command line (run here by bash
// with a stand-in d2k, as an array task would run it), and the parsing of what sbatch and squeue print.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "campaign/slurm.hpp"
#include "core/error.hpp"

namespace d2k::campaign {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("d2k_test_slurm_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SbatchJob job_in(const fs::path& dir) {
  SbatchJob job;
  job.campaign = "paper run";
  job.shards = 4;
  job.array = {0, 2, 3};
  job.gpus_per_task = 1;
  job.cpus_per_task = 16;
  job.time_minutes = 26 * 60 + 5;
  job.partition = "h200";
  job.account = "proj-42";
  job.options = {"--qos=high", "--exclusive"};
  job.d2k = dir / "bin dir" / "it's d2k";
  job.root = dir / "tree";
  job.plan = dir / "plans" / "paper plan.toml";
  job.dir = dir / "campaign $HOME";
  job.output = dir / "slurm";
  return job;
}

TEST(Slurm, ArraySpecTimeAndQuoting) {
  EXPECT_EQ(array_spec({0}), "0");
  EXPECT_EQ(array_spec({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(array_spec({3, 5}), "3,5");
  EXPECT_EQ(slurm_time(5), "0-00:05:00");
  EXPECT_EQ(slurm_time(26 * 60 + 5), "1-02:05:00");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  // 10 runs, 4 at once: 3 waves, one more for the experts and re-runs, 30 minutes each.
  EXPECT_EQ(array_task_minutes(30, 10, 4), 120);
  EXPECT_EQ(array_task_minutes(30, 8, 4), 90);
  EXPECT_EQ(array_task_minutes(0.5, 1, 4), 1);  // whole minutes, rounded up
}

TEST(Slurm, TheScriptAsksForWhatTheJobNeeds) {
  const auto dir = fresh_dir("directives");
  const auto script = sbatch_script(job_in(dir));
  EXPECT_EQ(script.rfind("#!/bin/bash\n", 0), 0u);
  for (const std::string line :
       {"#SBATCH --job-name=d2k-paper_run\n", "#SBATCH --array=0,2-3\n", "#SBATCH --ntasks=1\n", "#SBATCH --gres=gpu:1\n",
        "#SBATCH --cpus-per-task=16\n", "#SBATCH --time=1-02:05:00\n", "#SBATCH --partition=h200\n",
        "#SBATCH --account=proj-42\n", "#SBATCH --qos=high\n", "#SBATCH --exclusive\n"})
    EXPECT_NE(script.find(line), std::string::npos) << line << " not in:\n" << script;
  EXPECT_NE(script.find("#SBATCH --output=" + (dir / "slurm").string() + "/%A_%a.out\n"), std::string::npos) << script;
  // Directives come before the first command: sbatch stops reading them there.
  EXPECT_LT(script.rfind("#SBATCH"), script.find("set -euo pipefail"));

  auto cpu = job_in(dir);
  cpu.gpus_per_task = 0;
  cpu.cpus_per_task.reset();
  cpu.time_minutes.reset();
  cpu.partition.clear();
  cpu.account.clear();
  cpu.options.clear();
  const auto plain = sbatch_script(cpu);
  for (const std::string absent : {"--gres", "--cpus-per-task", "--time", "--partition", "--account"})
    EXPECT_EQ(plain.find(absent), std::string::npos) << absent << " in:\n" << plain;
}

TEST(Slurm, WhatCannotBeWrittenIsRefused) {
  const auto dir = fresh_dir("refused");
  auto job = job_in(dir);
  job.output = dir / "slurm logs";
  try {
    sbatch_script(job);
    FAIL() << "a space in an #SBATCH path was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slurm logs"), std::string::npos) << e.what();
  }
  job = job_in(dir);
  job.partition = "a b";
  EXPECT_THROW(sbatch_script(job), Error);
  job = job_in(dir);
  job.options = {"qos=high"};
  EXPECT_THROW(sbatch_script(job), Error);
  job = job_in(dir);
  job.array.clear();
  EXPECT_THROW(sbatch_script(job), Error);
}

// The script's command line, run by bash as an array task: a stand-in d2k prints its arguments.
TEST(Slurm, EachArrayTaskRunsItsShardWithPathsIntact) {
  const auto dir = fresh_dir("run");
  auto job = job_in(dir);
  fs::create_directories(job.d2k.parent_path());
  {
    std::ofstream fake(job.d2k);
    fake << "#!/bin/bash\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$ARGS_OUT\"\n"
            "mkdir -p \"${11}\"\n";  // the locks folder, as d2k makes it
  }
  fs::permissions(job.d2k, fs::perms::owner_all);
  const auto script = dir / "job.sbatch";
  std::ofstream(script) << sbatch_script(job);
  const auto args = dir / "args.txt";
  const auto command = "cd " + shell_quote(dir.string()) + " && env SLURM_ARRAY_TASK_ID=2 SLURM_JOB_ID=77 TMPDIR=" +
                       shell_quote(dir.string()) + " ARGS_OUT=" + shell_quote(args.string()) + " bash job.sbatch > out.txt 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read(dir / "out.txt");
  std::vector<std::string> got;
  std::istringstream lines(read(args));
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  const std::vector<std::string> want = {"--root", job.root.string(), "campaign", "run", job.plan.string(), "--dir",
                                         job.dir.string(), "--shard", "2/4", "--locks-dir", (dir / "d2k-locks-77").string(),
                                         "--progress-seconds", "60"};
  EXPECT_EQ(got, want);
  EXPECT_NE(read(dir / "out.txt").find("shard 2 of 4"), std::string::npos) << read(dir / "out.txt");
  EXPECT_FALSE(fs::exists(dir / "d2k-locks-77"));  // the task's private locks go with it
}

TEST(Slurm, JobIdsAndQueuedShards) {
  EXPECT_EQ(parse_job_id("1234\n"), "1234");
  EXPECT_EQ(parse_job_id("sbatch: warning: something\n5678;cluster-a\n"), "5678");
  EXPECT_THROW(parse_job_id("sbatch: error: Batch job submission failed\n"), Error);
  EXPECT_THROW(parse_job_id(""), Error);
  const std::string squeue = "100 0 RUNNING\n100 3 PENDING\n101 N/A RUNNING\n99 1 PENDING\n";
  EXPECT_EQ(shards_in_queue(squeue, {"100"}), (std::set<int>{0, 3}));
  EXPECT_EQ(shards_in_queue(squeue, {"100", "99"}), (std::set<int>{0, 1, 3}));
  EXPECT_TRUE(shards_in_queue(squeue, {"7"}).empty());
}

}  // namespace
}  // namespace d2k::campaign
