// What the orchestrator and a worker process say to each other. The orchestrator writes a
// WorkerRequest as request.json into a fresh directory, with one raw file per input; it starts
// `d2k-worker <dir>/request.json`; the worker writes one raw file per output and a WorkerResult as
// result.json. Reference outputs are never in that directory, so they never reach the worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"

namespace d2k {

struct WireTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements
  std::string file;  // relative to the request's directory: span * size_of(dtype) raw bytes
  bool inplace = false;  // outputs: the input of the same name, updated in place
};

struct WireScalar {
  std::string name;
  bool is_int = false;
  double value = 0.0;
};

struct TimingConfig {
  int warmup = 3;             // untimed calls before sampling
  int min_samples = 10;
  int max_samples = 200;
  double max_seconds = 1.0;   // stop sampling after this much time once min_samples are in
  // Stop early once min_samples are in and the 95% confidence interval of the median is within this
  // fraction of the median (0 turns the rule off): stable calls need few samples, noisy ones get more.
  double target_ci = 0.01;
  bool flush_l2 = true;       // cold-L2 samples: the L2 is overwritten before each one
};

struct WorkerRequest {
  std::string library;  // absolute path of the solution's shared object
  Device device = Device::cpu;
  std::vector<WireTensor> inputs;
  std::vector<WireTensor> outputs;
  std::vector<WireScalar> scalars;
  bool time = true;  // false: the correctness call only
  TimingConfig timing;
  // A second draw of the inputs, one file per input in `inputs` order (none: no second draw). The
  // worker first runs the solution on it, in the same buffers the first draw then takes, and writes
  // its outputs as <output file>.second: a solution that caches by address returns stale outputs.
  std::vector<std::string> second_inputs;
  // The task is deterministic: the second draw is run twice, outputs re-poisoned between, and the
  // second run's outputs are written as <output file>.repeat for the orchestrator to compare.
  bool repeat = false;
};

struct GuardViolation {
  std::string tensor;
  std::string side;  // "before" or "after" the tensor's memory
  int64_t bytes = 0;  // how many guard bytes were changed
};

struct WorkerResult {
  // ok: the outputs are written (and timed when asked); runtime_error: the solution failed to load or
  // a call reported or caused an error; rejected: it was caught doing what it must not (threads left
  // running after a call); the phase says where.
  std::string status = "ok";
  std::string phase;    // load | workspace | prepare | second_draw | repeat | run | timing
  std::string message;
  std::vector<GuardViolation> guard_violations;
  std::vector<double> samples_ms;  // one per timed call
  std::string device_name;
};

}  // namespace d2k
