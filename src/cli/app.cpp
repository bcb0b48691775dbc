#include "cli/app.hpp"

#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.hpp"

namespace d2k {

int run_cli(int argc, char** argv) {
  CLI::App app{"d2k: design-to-kernel benchmark. Is the kernel correct, and how fast is it against eager "
               "PyTorch, the expert and the GPU's speed of light?"};
  app.require_subcommand(1);
  GlobalOptions global;
  app.add_option("--root", global.root, "the d2k tree holding tasks/ and include/ (default: $D2K_ROOT or the build's source)");
  const Command commands[] = {add_tasks_command(app, global),    add_new_task_command(app, global),
                              add_eval_command(app, global),     add_bench_command(app, global),
                              add_ceilings_command(app, global), add_agent_command(app, global),
                              add_judge_command(app, global),
                              add_campaign_command(app, global), add_report_command(app, global)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (const auto& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const std::exception& e) {
    std::cerr << "d2k: error: " << e.what() << '\n';
  }
  return 2;
}

}  // namespace d2k
