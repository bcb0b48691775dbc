// The d2k command line: `d2k tasks`, `d2k eval`, `d2k bench`, `d2k ceilings`, `d2k agent`.
#pragma once

namespace d2k {

// Parses the arguments, runs the subcommand, returns the process exit code: 0 when everything
// passed, 1 when any trace failed, 2 for bad usage or a harness error.
int run_cli(int argc, char** argv);

}  // namespace d2k
