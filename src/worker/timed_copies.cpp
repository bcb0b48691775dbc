#include "worker/timed_copies.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/splitmix.hpp"
#include "timing/rotation.hpp"

namespace d2k {

struct TimedCopies::Copy {
  std::vector<std::unique_ptr<GuardedBuffer>> owned;
  std::vector<GuardedBuffer*> inputs, outputs;
  std::vector<d2k_tensor> input_tensors, output_tensors;
  std::vector<ElementSwap> last_patch;  // the swaps of the last call on this copy, still applied to its read-only inputs
};

namespace {

}  // namespace

TimedCopies::TimedCopies(const WorkerRequest& request, CallTensors copy0, uint64_t guard_seed)
    : request_(request), sample_state_(request.sample_seed) {
  const Device device = request.device;
  std::size_t buffers = 0;
  for (const auto& input : request.inputs) set_bytes_ += span_bytes(input), ++buffers;
  for (const auto& output : request.outputs) {
    if (output.inplace) continue;
    set_bytes_ += span_bytes(output);
    ++buffers;
  }
  const std::size_t budget = device == Device::cpu
                                 ? std::min<std::size_t>(kCpuRotationBudgetBytes, request.timing.rotate_max_bytes)
                                 : static_cast<std::size_t>(std::max<int64_t>(0, request.timing.rotate_max_bytes));
  const int wanted = rotation_sets(set_bytes_, buffers * 2 * GuardedBuffer::kGuardBytes,
                                   last_level_cache_bytes(device), budget, request.timing);

  pristine_.resize(request.inputs.size());
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    if (!inplace_output(request, request.inputs[i])) continue;
    pristine_[i] = std::make_unique<GuardedBuffer>(device, request.inputs[i].name, span_bytes(request.inputs[i]), guard_seed);
    pristine_[i]->fill(0xFF);
  }

  auto first = std::make_unique<Copy>();
  first->inputs = std::move(copy0.inputs);
  first->outputs = std::move(copy0.outputs);
  first->input_tensors = std::move(copy0.input_tensors);
  first->output_tensors = std::move(copy0.output_tensors);
  copies_.push_back(std::move(first));

  for (int k = 1; k < wanted; ++k) {
    auto copy = std::make_unique<Copy>();
    try {
      for (std::size_t i = 0; i < request.inputs.size(); ++i) {
        auto buffer = std::make_unique<GuardedBuffer>(device, request.inputs[i].name, span_bytes(request.inputs[i]),
                                                      guard_seed + k);
        buffer->fill(0xFF);
        copy->inputs.push_back(buffer.get());
        copy->input_tensors.push_back(copies_[0]->input_tensors[i]);
        copy->input_tensors.back().data = buffer->data();
        copy->owned.push_back(std::move(buffer));
      }
      for (std::size_t o = 0; o < request.outputs.size(); ++o) {
        const WireTensor& output = request.outputs[o];
        GuardedBuffer* buffer = nullptr;
        if (const WireTensor* input = inplace_input(request, output)) {
          buffer = copy->inputs[static_cast<std::size_t>(input - request.inputs.data())];
        } else {
          auto owned = std::make_unique<GuardedBuffer>(device, output.name, span_bytes(output), guard_seed + k);
          buffer = owned.get();
          copy->owned.push_back(std::move(owned));
        }
        copy->outputs.push_back(buffer);
        copy->output_tensors.push_back(copies_[0]->output_tensors[o]);
        copy->output_tensors.back().data = buffer->data();
      }
    } catch (const Error&) {
      break;  // out of memory: rotate through the copies made so far
    }
    copies_.push_back(std::move(copy));
  }

  // One slot at least: the no-op call's check uses it once the kept outputs are sent.
  for (int s = 0; s < std::max(1, request.sampled_calls); ++s) {
    std::vector<std::unique_ptr<GuardedBuffer>> slot;
    for (const auto& output : request.outputs) {
      slot.push_back(std::make_unique<GuardedBuffer>(device, output.name, span_bytes(output), guard_seed ^ 0x5107));
      // Touched now: host pages taken on first touch inside the timed loop (tens of ms for large outputs)
      // would be charged to the timed calls by the outside clock.
      slot.back()->fill(0xFF);
    }
    slots_.push_back(std::move(slot));
    slot_calls_.push_back(-1);
  }
  for (const auto& output : request.outputs) {
    always_slot_.push_back(std::make_unique<GuardedBuffer>(device, output.name, span_bytes(output), guard_seed ^ 0xA1));
    always_slot_.back()->fill(0xFF);
  }
}

TimedCopies::~TimedCopies() = default;

void TimedCopies::fill(const std::vector<std::string_view>& first_draw) {
  for (std::size_t i = 0; i < request_.inputs.size(); ++i) {
    if (pristine_[i]) pristine_[i]->upload(first_draw[i]);
    for (std::size_t k = 1; k < copies_.size(); ++k) copies_[k]->inputs[i]->upload(first_draw[i]);
  }
  for (auto& copy : copies_) copy->last_patch.clear();
  calls_ = 0;
  std::fill(slot_calls_.begin(), slot_calls_.end(), -1);
  always_call_ = -1;
}

void TimedCopies::apply(Copy& copy, const std::vector<ElementSwap>& swaps, bool read_only_only) {
  for (std::size_t i = 0; i < request_.inputs.size(); ++i) {
    if (read_only_only && pristine_[i]) continue;
    copy.inputs[i]->swap(swaps, static_cast<int>(i), size_of(request_.inputs[i].dtype));
  }
}

void TimedCopies::before_call(d2k_call& call) {
  current_ = static_cast<std::size_t>((calls_ + 1) % sets());
  Copy& copy = *copies_[current_];
  // Swaps are their own inverse: applying the last patch again restores the read-only inputs.
  apply(copy, copy.last_patch, true);
  for (std::size_t i = 0; i < request_.inputs.size(); ++i)
    if (pristine_[i]) copy.inputs[i]->copy_from(*pristine_[i]);
  copy.last_patch = call_patch(request_.patch_seed, calls_, request_.inputs, request_.patch_swaps);
  apply(copy, copy.last_patch, false);
  for (std::size_t o = 0; o < request_.outputs.size(); ++o)
    if (!request_.outputs[o].inplace) copy.outputs[o]->fill(0xFF);
  if (workspace_) workspace_->fill(0xFF);
  call.inputs = copy.input_tensors.data();
  call.outputs = copy.output_tensors.data();
  ++calls_;
}

void TimedCopies::after_call(bool always) {
  const int64_t call = calls_ - 1;
  const Copy& copy = *copies_[current_];
  if (always) {
    if (always_call_ >= 0) throw Error("TimedCopies: a second call kept always since the copies were filled");
    for (std::size_t o = 0; o < request_.outputs.size(); ++o) always_slot_[o]->copy_from(*copy.outputs[o]);
    always_call_ = call;
    return;
  }
  if (slots_.empty()) return;
  // Reservoir sampling: after n calls, each of them is in a slot with the same probability.
  int64_t slot = call;
  if (call >= static_cast<int64_t>(slots_.size())) {
    slot = static_cast<int64_t>(splitmix64(sample_state_) % static_cast<uint64_t>(call + 1));
    if (slot >= static_cast<int64_t>(slots_.size())) return;
  }
  for (std::size_t o = 0; o < request_.outputs.size(); ++o) slots_[slot][o]->copy_from(*copy.outputs[o]);
  slot_calls_[slot] = call;
}

const std::vector<GuardedBuffer*>& TimedCopies::current_outputs() const { return copies_[current_]->outputs; }

std::vector<KeptCall> TimedCopies::kept() const {
  std::vector<KeptCall> kept;
  if (calls_ == 0) return kept;
  const int64_t last = calls_ - 1;
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    if (slot_calls_[s] < 0 || slot_calls_[s] == last) continue;
    KeptCall one{slot_calls_[s], {}};
    for (const auto& buffer : slots_[s]) one.outputs.push_back(buffer.get());
    kept.push_back(std::move(one));
  }
  if (always_call_ >= 0 && always_call_ != last) {
    KeptCall one{always_call_, {}};
    for (const auto& buffer : always_slot_) one.outputs.push_back(buffer.get());
    kept.push_back(std::move(one));
  }
  KeptCall final_call{last, {}};
  for (const GuardedBuffer* buffer : copies_[current_]->outputs) final_call.outputs.push_back(buffer);
  kept.push_back(std::move(final_call));
  std::sort(kept.begin(), kept.end(), [](const KeptCall& a, const KeptCall& b) { return a.call < b.call; });
  return kept;
}

std::vector<uint64_t> TimedCopies::input_digests(uint64_t key) {
  std::vector<uint64_t> digests;
  for (auto& copy : copies_) {
    apply(*copy, copy->last_patch, true);
    copy->last_patch.clear();
    for (std::size_t i = 0; i < request_.inputs.size(); ++i)
      if (!pristine_[i]) digests.push_back(copy->inputs[i]->digest(key));
  }
  return digests;
}

std::vector<const GuardedBuffer*> TimedCopies::buffers() const {
  std::vector<const GuardedBuffer*> out;
  for (const auto& copy : copies_)
    for (const auto& buffer : copy->owned) out.push_back(buffer.get());
  return out;
}

}  // namespace d2k
