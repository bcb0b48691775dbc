// The copies of one call's tensors that the timing loop cycles through (timing/rotation.hpp says why and
// how many), the fresh patch of every timed call's inputs (core/call_patch.hpp), and the outputs of a few
// timed calls kept for the orchestrator to check, chosen after each call (reservoir sampling), beside the
// last call's.
//
// Copy 0 is the checked call's own tensors; copies 1.. hold the first draw at other addresses. Call i
// (counted from 0 in call order: the verification calls before the timed loop, the warm-up, the timed
// calls, the verification calls after) uses copy (i + 1) mod n, so no call finds its inputs where the
// call before it did. Before call i, untimed and ahead of the L2 flush: its copy's in-place inputs are
// restored from their pristine bytes, the swaps of that copy's previous call are undone on its read-only
// inputs, call i's swaps are applied, its outputs and the workspace are poisoned (0xFF). So every call
// computes from inputs no earlier call saw, and the restore leaves nothing of them in the L2.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/call_patch.hpp"
#include "core/worker_protocol.hpp"
#include "d2k/solution.h"
#include "worker/buffers.hpp"

namespace d2k {

// Copy 0 as the worker set it up: a buffer per input and per output (an in-place output's buffer is its
// input's), and the ABI tensors that point at them.
struct CallTensors {
  std::vector<GuardedBuffer*> inputs, outputs;
  std::vector<d2k_tensor> input_tensors, output_tensors;
};

// A timed call whose outputs are kept: its index and its outputs' buffers.
struct KeptCall {
  int64_t call = 0;
  std::vector<const GuardedBuffer*> outputs;
};

class TimedCopies {
 public:
  // Allocates the copies (fewer when memory runs out), their contents poison until fill(). Throws d2k::Error.
  TimedCopies(const WorkerRequest& request, CallTensors copy0, uint64_t guard_seed);
  ~TimedCopies();

  int sets() const { return static_cast<int>(copies_.size()); }
  int64_t bytes() const { return static_cast<int64_t>(set_bytes_) * sets(); }
  int64_t calls() const { return calls_; }

  // The first draw into copies 1.. and the pristine in-place inputs; call indices start again at 0 and
  // the kept outputs are forgotten (the loop run before the solution was loaded used poison).
  void fill(const std::vector<std::string_view>& first_draw);
  // Poisoned before every call too; may be null.
  void set_workspace(GuardedBuffer* workspace) { workspace_ = workspace; }

  // Untimed, before a call: the next copy, restored, patched and poisoned; `call` points at its tensors.
  void before_call(d2k_call& call);
  // Untimed, after a call and the device-wide synchronization: maybe keep its outputs (always, with
  // `always`: a call whose outputs must come back whatever the sampling draws, at most one per fill).
  void after_call(bool always = false);

  // The outputs of the copy the last call used (or the last before_call prepared).
  const std::vector<GuardedBuffer*>& current_outputs() const;
  // A buffer the size of every output, for the worker's own use once the kept outputs are sent.
  const std::vector<std::unique_ptr<GuardedBuffer>>& spare_outputs() const { return slots_.front(); }

  // After the loop: the kept calls and the last one, in call order, each once.
  std::vector<KeptCall> kept() const;
  // After the loop: every copy's read-only inputs with its last patch undone, digested with `key` (copy by
  // copy, inputs in request order): each must be the first draw's.
  std::vector<uint64_t> input_digests(uint64_t key);
  // Every buffer the copies added, for the guard check.
  std::vector<const GuardedBuffer*> buffers() const;

 private:
  struct Copy;
  void apply(Copy& copy, const std::vector<ElementSwap>& swaps, bool read_only_only);

  const WorkerRequest& request_;
  std::size_t set_bytes_ = 0;
  std::vector<std::unique_ptr<Copy>> copies_;
  std::vector<std::unique_ptr<GuardedBuffer>> pristine_;  // per input: its first-draw bytes, when in place
  GuardedBuffer* workspace_ = nullptr;
  int64_t calls_ = 0;
  std::size_t current_ = 0;
  // Reservoir of request.sampled_calls slots: the call each holds (-1: empty) and its outputs.
  std::vector<int64_t> slot_calls_;
  int64_t always_call_ = -1;  // the call kept by after_call(true), its outputs in always_slot_
  std::vector<std::unique_ptr<GuardedBuffer>> always_slot_;
  std::vector<std::vector<std::unique_ptr<GuardedBuffer>>> slots_;
  uint64_t sample_state_ = 0;
};

}  // namespace d2k
