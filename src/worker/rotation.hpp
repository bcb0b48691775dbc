// The copies of one call's tensors that the timed calls cycle through (timing/rotation.hpp says why and
// how many), and the checks of every timed call: its outputs against the correctness call's, bytewise.
//
// Copy 0 is the correctness call's own tensors; copies 1.. hold the same input bytes (from the request's
// files, not from copy 0, which the solution has had in hand) at other addresses, each with outputs of
// its own. Call i (warm-up calls first) uses copy (i + 1) mod n, so no call finds its inputs where the
// call before it did, the correctness call included.
//
// In-place outputs: a call overwrites its copy's input, so the next call on that copy would compute from
// other values. Before every call its copy's in-place inputs are restored from a pristine copy; this
// happens in the untimed `before` hook, ahead of the L2 flush, so the restore costs no time and leaves
// nothing of the input in L2 (the flush evicts it, dirty lines written back before the call starts).
// A restored copy computes exactly what the correctness call computed, so in-place outputs are checked
// like the others. Outputs that are not in place are poisoned (0xFF) before every call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/worker_protocol.hpp"
#include "d2k/solution.h"
#include "worker/buffers.hpp"
#include "worker/byte_compare.hpp"
#include "worker/sent_files.hpp"

namespace d2k {

// Copy 0 as the worker set it up: a buffer per input and per output (an in-place output's buffer is its
// input's), and the ABI tensors that point at them.
struct CallTensors {
  std::vector<GuardedBuffer*> inputs, outputs;
  std::vector<d2k_tensor> input_tensors, output_tensors;
};

class Rotation {
 public:
  // Right after the correctness call: copy 0's outputs are its outputs. Allocates the other copies
  // (fewer when memory runs out) and uploads their inputs from the files sent. Throws d2k::Error.
  Rotation(const WorkerRequest& request, SentFiles& sent, uint64_t seed, CallTensors copy0);
  ~Rotation();

  int sets() const { return static_cast<int>(copies_.size()); }
  int64_t bytes() const { return static_cast<int64_t>(set_bytes_) * sets(); }

  // Untimed, before a call: the next copy, restored and poisoned; `call` points at its tensors.
  void before_call(d2k_call& call);
  // Untimed, after a call (and the device-wide synchronization): its outputs against the correctness
  // call's, bytewise, when the op is deterministic.
  void after_call();
  // After the last call: every copy's read-only inputs against copy 0's (which the orchestrator checks
  // against what it sent).
  void check_inputs();

  const TimedCallCheck& check() const { return check_; }
  // The outputs of the copy the last call used, in request order.
  const std::vector<GuardedBuffer*>& last_outputs() const;
  // Every buffer the copies added, for the guard check.
  std::vector<const GuardedBuffer*> buffers() const;

 private:
  struct Copy;

  const WorkerRequest& request_;
  std::size_t set_bytes_ = 0;
  std::vector<std::unique_ptr<Copy>> copies_;
  std::vector<std::unique_ptr<GuardedBuffer>> want_;      // the correctness call's outputs
  std::vector<std::unique_ptr<GuardedBuffer>> pristine_;  // per input: its bytes as sent, when in place
  int64_t calls_ = 0;
  std::size_t current_ = 0;
  TimedCallCheck check_;
  ByteCompare differing_bytes_;
};

}  // namespace d2k
