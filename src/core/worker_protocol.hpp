// What the orchestrator and a worker process say to each other. The orchestrator writes a
// WorkerRequest as request.json into a fresh directory, with one raw file per input; it starts
// `d2k-worker <dir>/request.json`, a fresh token on its stdin; the worker writes one raw file per output
// and a WorkerResult as result.json, the token in it. Reference outputs are never in that directory, so
// they never reach the worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/trace.hpp"

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
  // Input rotation (timing/rotation.hpp): the timed calls cycle through copies of the call's inputs and
  // outputs that together hold at least this multiple of the last-level cache (0: one copy only),
  // at most rotate_max_sets copies and rotate_max_bytes of memory.
  double rotate_cache_multiple = 3.0;
  int rotate_max_sets = 64;
  int64_t rotate_max_bytes = int64_t{4} << 30;
};

// The fewest timed calls per workload when the command line does not say: on a GPU a call takes
// microseconds and the median of 10 moved by 2% from one evaluation to the next (docs/results/), so 50;
// on the cpu device, a test seam where calls take milliseconds, 10.
inline int default_min_samples(Device device) { return device == Device::cuda ? 50 : 10; }

struct WorkerRequest {
  std::string library;  // absolute path of the solution's shared object
  Device device = Device::cpu;
  std::vector<WireTensor> inputs;
  std::vector<WireTensor> outputs;
  std::vector<WireScalar> scalars;
  bool time = true;  // false: the correctness call only
  // The op gives the same bytes for the same inputs (task.toml `deterministic`): every timed call's
  // outputs must equal the correctness call's bytewise, and the second draw runs twice, outputs
  // re-poisoned between, the two runs compared bytewise in the worker. When false, the last timed
  // call's outputs come back as <output file>.timed (checked with the tolerance).
  bool deterministic = true;
  TimingConfig timing;
  // A second draw of the inputs, one file per input in `inputs` order (none: no second draw). The
  // worker first runs the solution on it, in the same buffers the first draw then takes, and writes
  // its outputs as <output file>.second: a solution that caches by address returns stale outputs.
  std::vector<std::string> second_inputs;
};

struct GuardViolation {
  std::string tensor;
  std::string side;  // "before" or "after" the tensor's memory
  int64_t bytes = 0;  // how many guard bytes were changed
};

// What the worker found checking the timed calls: every call's outputs against the correctness call's
// (bytewise, for deterministic ops), and the rotated copies' read-only inputs against the originals.
struct TimedCallCheck {
  int64_t calls = 0;             // timed and warm-up calls whose outputs were compared
  int64_t mismatched_calls = 0;
  int64_t first_call = -1;       // 1-based index of the first mismatched call (warm-up calls first)
  int first_set = -1;            // the copy it used (0: the correctness call's tensors)
  std::string first_output;
  int64_t first_bytes = 0;       // bytes of that output that differed
  std::vector<std::string> modified_inputs;  // "'x' of copy 3"
};

struct WorkerResult {
  // ok: the outputs are written (and timed when asked); runtime_error: the solution failed to load or
  // a call reported or caused an error; rejected: it was caught doing what it must not (threads left
  // running after a call); the phase says where.
  std::string status = "ok";
  std::string phase;    // load | workspace | prepare | second_draw | repeat | run | timing | release
  std::string message;
  std::vector<GuardViolation> guard_violations;
  std::vector<double> samples_ms;  // one per timed call
  std::string device_name;
  int rotation_sets = 0;           // copies the timed calls cycled through (0: not timed)
  int64_t rotation_bytes = 0;      // their tensor bytes together
  TimedCallCheck timed_check;
  std::optional<GpuClocks> clocks; // cuda only
  std::vector<Phase> phases;       // the worker's own steps, in order
  // The orchestrator's secret for this evaluation, handed to the worker on its stdin (never in a file,
  // argument or variable the solution can read) and read before the solution loads: a result.json
  // without it was written by someone else than the worker.
  std::string token;
};

}  // namespace d2k
