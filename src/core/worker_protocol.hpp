// What the orchestrator and a worker process say to each other (docs/integrity.md says why it is shaped
// so). Nothing goes through files a solution could write: the orchestrator writes a control stream to
// the worker's stdin (the request, where each input draw lies in a sealed memory file, and acks of the
// clock frames); the worker writes an evidence stream on its fd 3 (a frame right after each call whose
// results it carries) and logs on stderr. Both streams are frames:
//
//   header: magic "D2K2", kind, seq (0, 1, 2, ... per stream), payload size, the evaluation's token
//   payload: u32 size of a JSON object (the frame's fields), the JSON, then raw bytes (tensor data)
//
// Reference outputs never reach the worker. The solution runs in the worker's process, so it could write
// frames of its own on fd 3: the orchestrator accepts only frames with the token, in seq order, of the
// kinds expected at that point, and nothing after `end`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/trace.hpp"

namespace d2k {

// The worker's side of the channels. The child gets the evidence pipe as fd 3; before the solution is
// loaded the worker moves both streams to these numbers (which its seccomp filter then protects from
// close and dup2), puts /dev/null on stdin and points stdout at stderr.
inline constexpr int kChildEvidenceFd = 3;
inline constexpr int kControlFd = 1000;
inline constexpr int kEvidenceFd = 1001;
// The input draws' bytes, in a memory file that the child gets as fd 4 (read-only) when it starts: hundreds
// of MB that a pipe would move several times slower. The worker may start before the draws are made; the
// orchestrator fills the file, then seals it against any write, growth or shrink, and only then sends the
// draws' input frames. The worker maps it (read-only) once those frames have come and the seals are there,
// and closes the descriptor.
inline constexpr int kChildInputsFd = 4;

inline constexpr uint32_t kFrameMagic = 0x324b3244;  // "D2K2" little-endian
inline constexpr std::size_t kTokenBytes = 16;
using Token = std::array<uint8_t, kTokenBytes>;

enum class FrameKind : uint32_t {
  // orchestrator -> worker
  request = 1,  // fields: the WorkerRequest
  input = 2,    // fields: {draw: 1 or 2, input, offset}: its bytes (span * size of its dtype) in the inputs file
  ack = 3,      // fields: {seq}: the clock frame `seq` was read and its times taken; the worker waits for it
  // worker -> orchestrator
  stage = 10,    // fields: {stage, seconds}: the worker begins `stage`; the step before it took `seconds`
  clock = 11,    // fields: {mark}: the orchestrator notes when it arrives (outside clock) and acks it
  outputs = 12,  // fields: {draw, call}; raw: every output's bytes, in request order
  digests = 13,  // fields: {what, digests}: keyed digests (core/keyed_digest.hpp) of tensors in place
  timing = 14,   // fields: the TimingReport
  failure = 15,  // fields: the WorkerFailure; the stage it names is where the solution failed
  end = 16,      // fields: {device_name, guard_violations}: the worker's last frame
};
std::string_view name_of(FrameKind kind);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t kind = 0;
  uint64_t seq = 0;
  uint64_t size = 0;  // payload bytes
  Token token{};
};
static_assert(sizeof(FrameHeader) == 40, "the header is written as raw bytes");

// The worker's steps, in order. A failure names the step it happened in; the evidence stream says which
// steps the worker began.
enum class Stage {
  setup,         // device, buffers, copies for the timed calls: nothing of the draws is needed yet
  draws,         // waiting for the draws' input frames (the orchestrator may still be making them), mapping them
  noop_timing,   // the timing loop with nothing called: the harness's own cost per call (outside clock)
  load,          // dlopen, the entry points, the libraries it brought
  workspace,
  prepare,       // sees only the inputs the task lets it see
  second_draw,   // the second draw, in the buffers the first draw takes next
  repeat,        // deterministic tasks: the second draw again, outputs poisoned between
  run,           // the checked call, on the first draw
  seeded,        // a task with a sampled output: more calls on the first draw, each with a fresh seed
  timing,        // the timed calls, each on freshly patched inputs
  verification,  // cuda: a few more calls under a second clock (CUPTI)
  noop_call,     // the solution not called at all: outputs must not change
  noop_timing_after,  // the timing loop with nothing called again: the harness's cost under the load of now
  release,
  done,
};
std::string_view name_of(Stage stage);
std::optional<Stage> parse_stage(std::string_view name);

// Marks of the outside clock (FrameKind::clock): the orchestrator times the interval between begin and
// end by its own clock, with the number of timed calls in it. The noop loop runs before the solution is
// loaded and again after its timed calls: on a machine whose load changes, the harness's cost per call
// is taken as the larger of the two, the cost it may have had while the calls were timed.
enum class ClockMark { noop_begin, noop_end, timed_begin, timed_end, noop_after_begin, noop_after_end };
std::string_view name_of(ClockMark mark);
std::optional<ClockMark> parse_clock_mark(std::string_view name);

// Which call an outputs frame carries.
enum class Draw { second, checked, timed, seeded };
std::string_view name_of(Draw draw);
std::optional<Draw> parse_draw(std::string_view name);

struct WireTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements
  bool inplace = false;  // outputs: the input of the same name, updated in place
  bool prepare = false;  // inputs: d2k_prepare may see it (weights); the others hold poison during prepare
  bool perturb = false;  // inputs: timed calls see it with a few elements swapped (core/call_patch.hpp)
  int64_t relabel = 0;   // inputs, when perturb: > 0 relabels the last dimension within blocks of this size instead
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
  bool flush_l2 = true;       // cuda: cold-L2 samples, the L2 overwritten before each one (the cpu device never flushes)
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

// A Triton solution's runtime (docs/abi.md, "Triton solutions"): the worker embeds the CPython of this
// shared library, with the standard library under `home` and Triton from `site` (a folder holding triton/),
// and reads the compiled kernels from the warm-up's cache, never compiling one itself.
struct WirePython {
  std::string library;     // libpython3.X.so.1.0
  std::string home;        // sys.base_prefix
  std::string site;        // the folder that holds triton/
  std::string cache;       // the warm-up's Triton cache (read-only in the worker)
  std::string entry;       // the solution's module that defines launch
  std::vector<std::string> modules;  // all of the solution's modules (its .py files' stems)
  int capability = 90;     // the target the warm-up compiled for (sm_90a)
};

struct WorkerRequest {
  std::string token;    // 32 hex digits: every evidence frame carries it (FrameHeader::token)
  std::string library;  // absolute path of the solution's shared object (Triton: its entry module's file)
  std::optional<WirePython> python;  // set for a Triton solution
  Device device = Device::cpu;
  std::vector<WireTensor> inputs;
  std::vector<WireTensor> outputs;
  std::vector<WireScalar> scalars;
  bool time = true;  // false: the checked call only
  // The op gives the same bytes for the same inputs (task.toml `deterministic`): the second draw runs
  // twice, outputs poisoned between, and the two runs must agree bytewise.
  bool deterministic = true;
  bool second_draw = true;  // a second draw of the inputs follows the first in the control stream
  TimingConfig timing;
  uint64_t digest_key = 0;     // keys every digest the worker sends (core/keyed_digest.hpp)
  uint64_t patch_seed = 0;     // the timed calls' patches (core/call_patch.hpp)
  int patch_swaps = 8;         // swaps per perturbable input per timed call
  uint64_t sample_seed = 0;    // which timed calls' outputs come back
  int sampled_calls = 2;       // timed calls whose outputs come back, besides the last one
  // A task with a sampled output (metric 'sample'): after the checked call, seeded_calls more calls on
  // the first draw, the int scalar seed_scalar set to seeded_seed(seed_key, i) in call i; each call's
  // outputs come back (Draw::seeded) for the distribution test (reference/sample_test.hpp).
  int seeded_calls = 0;
  std::string seed_scalar;
  uint64_t seed_key = 0;
};

// The seed of seeded call i: well mixed, below 2^53 (a scalar's value crosses the wire as a double).
uint64_t seeded_seed(uint64_t key, int64_t call);

// Elements from the first to one past the last addressable element: 1 + sum((shape_i - 1) * stride_i),
// 0 when any dimension is 0, 1 for a scalar (rank 0).
int64_t span_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
std::size_t span_bytes(const WireTensor& tensor);
// The input that an in-place output updates; nullptr when there is none.
const WireTensor* inplace_input(const WorkerRequest& request, const WireTensor& output);
// Whether an in-place output updates this input (so it may change).
bool inplace_output(const WorkerRequest& request, const WireTensor& input);

struct GuardViolation {
  std::string tensor;
  std::string side;  // "before" or "after" the tensor's memory
  int64_t bytes = 0;  // how many guard bytes were changed
};

enum class WorkerStatus { ok, runtime_error, rejected };
std::string_view name_of(WorkerStatus status);
std::optional<WorkerStatus> parse_worker_status(std::string_view name);

// The solution failed (runtime_error) or was caught (rejected) in `stage`.
struct WorkerFailure {
  WorkerStatus status = WorkerStatus::runtime_error;
  Stage stage = Stage::setup;
  std::string message;
};

// What the second clock (CUPTI's activity records of the device's work, timing/cupti_clock.hpp) saw in
// the verification calls, beside the event timer's samples of the same calls.
struct SecondClockReport {
  bool available = false;
  std::string unavailable;             // why not
  std::vector<double> event_ms;        // the event timer, per verification call
  std::vector<double> busy_ms;         // the union of the solution's device work in each call
  int before_calls = 0;                // the first calls of the two lists ran before the timed loop, the rest after
  int other_context = 0;               // of that work, on another context than the harness's
  int between_calls = 0;               // solution kernels that started outside every call
  std::vector<std::string> contexts_created;  // CUDA contexts the solution created
};

// Calls under the second clock (cuda), one right before the timed loop and the rest right after it, few
// enough that CUPTI's instrumentation costs nothing worth noticing. Both sides, because a power cap may
// lower the SM clock by a tenth between the timed loop and the calls after it (an H200 at 1980 MHz through
// the timed loop of a 1.5 ms compute-bound kernel, about 1770 MHz in the calls after it): the timed median
// is held against the faster side. The call before is the timing stage's first, so a solution counting
// its calls knows it: its outputs always come back and are checked (a solution that skipped its work
// there would lower the bar the timed loop is held to). They take patch indices in call order like every
// call (before the warm-up's, after the timed calls').
inline constexpr int kVerificationCallsBefore = 1;
inline constexpr int kVerificationCallsAfter = 5;
inline constexpr int kVerificationCalls = kVerificationCallsBefore + kVerificationCallsAfter;

struct TimingReport {
  std::vector<double> samples_ms;   // one per timed call
  int64_t calls = 0;                // every patched call, in order (patch indices 0..): verification before,
                                    // warm-up, timed, verification after
  int rotation_sets = 0;            // copies the timed calls cycled through
  int64_t rotation_bytes = 0;       // their tensor bytes together
  int64_t noop_samples = 0;         // samples of the timing loop run with nothing called, before load
  std::optional<GpuClocks> clocks;  // cuda only
  std::optional<SecondClockReport> second_clock;  // cuda only
};

// Digests (FrameKind::digests): `what` says of which tensors, in request order of those it covers.
inline constexpr std::string_view kDigestInputsSecond = "inputs after the second draw";
inline constexpr std::string_view kDigestInputsChecked = "inputs after the checked call";
inline constexpr std::string_view kDigestInputsCopies = "inputs of the timed calls' copies";
inline constexpr std::string_view kDigestRepeat = "outputs of the repeat";

// One frame as read, with the orchestrator's clock at its arrival.
struct Frame {
  FrameKind kind = FrameKind::end;
  uint64_t seq = 0;
  Token token{};
  std::string fields;  // JSON text
  std::string payload;         // the whole payload; the raw part starts at raw_begin
  std::size_t raw_begin = 0;
  double arrival_seconds = 0;  // since the worker started, by the orchestrator's clock
  std::optional<double> cpu_seconds;  // clock frames: the worker's time on or waiting for a CPU then (the kernel's)

  std::string_view raw() const { return std::string_view(payload).substr(raw_begin); }
};

// The bytes of one frame: header + payload.
std::string encode_frame(FrameKind kind, uint64_t seq, const Token& token, std::string_view fields,
                         std::string_view raw = {});
// The header and JSON part of a frame whose raw part follows separately (large tensors: no copy).
std::string encode_frame_head(FrameKind kind, uint64_t seq, const Token& token, std::string_view fields,
                              std::size_t raw_bytes);

// Splits a byte stream into frames as it arrives. A malformed header (wrong magic, a size beyond
// max_payload) stops it for good: broken() says why.
class FrameReader {
 public:
  explicit FrameReader(uint64_t max_payload) : max_payload_(max_payload) {}
  // Feeds bytes; complete frames are appended to `out` with `now` as their arrival.
  void feed(const char* data, std::size_t size, double now, std::vector<Frame>& out);
  const std::optional<std::string>& broken() const { return broken_; }
  // Bytes of a frame begun but not finished.
  std::size_t pending() const { return have_header_ ? header_fill_ + payload_.size() : header_fill_; }

 private:
  void fail(std::string why);
  uint64_t max_payload_;
  FrameHeader header_{};
  std::size_t header_fill_ = 0;
  bool have_header_ = false;
  std::string payload_;  // the bytes of the frame begun so far (capacity: its whole size)
  std::optional<std::string> broken_;
};

// 32 hex digits <-> 16 bytes; nothing for text that is not exactly that.
std::optional<Token> parse_token(std::string_view hex);
std::string token_hex(const Token& token);

}  // namespace d2k
