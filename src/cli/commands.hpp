// The subcommands of `d2k`, one file each (cli/<name>_command.cpp): each adds its CLI11 subcommand with
// its flags to the app and returns how to run it once the command line is parsed.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace d2k {

// The options before the subcommand.
struct GlobalOptions {
  std::string root;  // --root (cli/context.hpp)
};

struct Command {
  CLI::App* app = nullptr;  // parsed(): the command line chose this subcommand
  // The exit status: 0 when everything passed, 1 when something failed, 2 for bad usage or a harness
  // error. Throws d2k::Error (and other std::exceptions) for the latter; run_cli turns them into 2.
  std::function<int()> run;
};

// `global` must outlive the returned commands; they read it only when run.
Command add_tasks_command(CLI::App& app, const GlobalOptions& global);
Command add_new_task_command(CLI::App& app, const GlobalOptions& global);
Command add_eval_command(CLI::App& app, const GlobalOptions& global);
Command add_bench_command(CLI::App& app, const GlobalOptions& global);
Command add_ceilings_command(CLI::App& app, const GlobalOptions& global);
Command add_agent_command(CLI::App& app, const GlobalOptions& global);
Command add_judge_command(CLI::App& app, const GlobalOptions& global);
Command add_campaign_command(CLI::App& app, const GlobalOptions& global);
Command add_report_command(CLI::App& app, const GlobalOptions& global);

}  // namespace d2k
