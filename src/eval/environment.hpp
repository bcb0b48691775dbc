// Where and with what evaluations run: the device and its measured ceilings, the d2k tree, the caches,
// the worker executable and the sandbox. Made once per command and shared by every evaluation of it.
// Each piece has its own function, so that a command needing only some of them (`d2k ceilings`: the
// device and its ceilings) never probes a sandbox or looks for a worker.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "core/ceilings.hpp"
#include "core/device.hpp"
#include "runner/builder.hpp"
#include "runner/sandbox.hpp"
#include "runner/triton.hpp"

namespace d2k {

struct EvalEnvironment {
  Device device = Device::cpu;
  std::string device_name;
  Ceilings ceilings;
  std::filesystem::path root;         // holds tasks/ and include/d2k/solution.h
  std::filesystem::path build_cache;  // solution builds (runner/builder.hpp)
  std::filesystem::path scratch_dir;  // a fresh folder per worker (its working directory), removed after it
  std::filesystem::path worker;       // the d2k-worker executable
  std::optional<Sandbox> sandbox;     // builds and workers run in it (its mode and launcher)
  // Where several evaluations share the device (a campaign's runs): takes the device's lock, exclusive
  // for timed work, shared for untimed checks, held until the returned handle is dropped. Empty: no lock
  // (one evaluation at a time, as in `d2k eval`). src/campaign/device_locks.hpp makes one.
  std::function<std::shared_ptr<void>(bool exclusive)> hold_device;
};

// What the environment is made from: the command line's choices and the places it resolved.
struct EnvironmentOptions {
  std::string device = "auto";      // auto (cuda when a GPU is usable, else cpu), cuda or cpu
  std::string sandbox = "strict";   // strict, best-effort or off (docs/sandbox.md)
  bool refresh_ceilings = false;    // measure the ceilings again instead of reading the cached ones
  std::filesystem::path root;       // the d2k tree
  std::filesystem::path cache_dir;  // holds builds/, scratch/ and the measured ceilings
  std::filesystem::path bin_dir;    // holds d2k-worker and d2k-sandbox; empty: the running executable's folder
  std::ostream* log = nullptr;      // notes for a person: why auto chose cpu, the sandbox, ceilings measured
};

// The device `options.device` names. auto falls back to cpu, saying why on the log; cuda that is not
// usable and an unknown name are errors.
Device resolve_device(const EnvironmentOptions& options);

// The device's ceilings cached under options.cache_dir, measured (and cached) when there are none or
// options.refresh_ceilings is set (timing/ceilings.hpp).
Ceilings device_ceilings(Device device, const EnvironmentOptions& options);

// The sandbox of builds and workers, tried once: in strict mode a machine that cannot isolate them is an
// error before anything is evaluated; otherwise the log says what applies.
Sandbox probe_sandbox(Device device, const EnvironmentOptions& options);

// The d2k-worker executable in options.bin_dir; an error naming the path when it is missing.
std::filesystem::path find_worker(const EnvironmentOptions& options);

// All of the above, and the cache folders created: what `d2k eval`, `d2k bench` and `d2k agent` run in.
EvalEnvironment make_environment(const EnvironmentOptions& options);

// What builds alone need (`d2k bench --build-only`): the device named, the d2k tree, the build cache and
// the sandbox. A named cuda device need not be usable here (nvcc needs no GPU: a machine without one
// fills the cache a GPU machine then reads); auto still means cuda only where a GPU is usable. No
// worker, no ceilings.
EvalEnvironment make_build_environment(const EnvironmentOptions& options);

// How `solution` is built in `environment`: its cache, ABI header, CUTLASS headers and sandbox, the
// pinned Triton's version for a Triton solution on cuda (in *triton too when given; why it is missing
// otherwise). One place, so that an agent's compile tool and the evaluator build alike (same cache key).
BuildOptions solution_build_options(const EvalEnvironment& environment, const Solution& solution, double timeout_seconds,
                                    std::optional<TritonSetup>* triton = nullptr);

}  // namespace d2k
