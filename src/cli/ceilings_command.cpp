// `d2k ceilings`: the device's measured copy and read bandwidth and matrix rates (cached per machine). Needs
// neither the worker nor a sandbox: nothing is evaluated.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "eval/environment.hpp"
#include "timing/device_info.hpp"

namespace d2k {

Command add_ceilings_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<EnvironmentOptions>();
  auto* command = app.add_subcommand("ceilings", "measure (or show the cached) copy and read bandwidth and dense bf16/fp8/int8 matrix rates");
  command->add_option("--device", options->device, "auto, cuda or cpu")->capture_default_str();
  command->add_flag("--refresh", options->refresh_ceilings, "measure again");
  return {command, [options, &global] {
            const auto context = make_context(global.root);
            options->root = context.root;
            options->cache_dir = context.cache_dir;
            options->log = &std::cerr;
            const Device device = resolve_device(*options);
            const Ceilings c = device_ceilings(device, *options);
            std::cout << fmt::format("{} ({}): copy {:.0f} GB/s (read + write), read {:.0f} GB/s", device_name(device),
                                     name_of(device), c.copy_gbps, c.read_gbps);
            if (c.bf16_tflops) std::cout << fmt::format(", dense bf16 {:.0f} TFLOP/s", *c.bf16_tflops);
            if (c.fp8_tflops) std::cout << fmt::format(", dense fp8 (e4m3) {:.0f} TFLOP/s", *c.fp8_tflops);
            if (c.int8_tops) std::cout << fmt::format(", dense int8 {:.0f} TOPS", *c.int8_tops);
            std::cout << '\n';
            return 0;
          }};
}

}  // namespace d2k
