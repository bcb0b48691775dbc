#include "worker/rotation.hpp"

#include "core/error.hpp"
#include "timing/rotation.hpp"
#include "worker/request.hpp"

namespace d2k {
struct Rotation::Copy {
  std::vector<std::unique_ptr<GuardedBuffer>> owned;
  std::vector<GuardedBuffer*> inputs, outputs;
  std::vector<d2k_tensor> input_tensors, output_tensors;
};

Rotation::Rotation(const WorkerRequest& request, SentFiles& sent, uint64_t seed, CallTensors copy0)
    : request_(request) {
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

  // The references every call is checked against, and the pristine in-place inputs.
  for (std::size_t o = 0; o < request.outputs.size(); ++o) {
    auto want = std::make_unique<GuardedBuffer>(device, request.outputs[o].name, copy0.outputs[o]->bytes(), seed);
    want->copy_from(*copy0.outputs[o]);
    want_.push_back(std::move(want));
  }
  pristine_.resize(request.inputs.size());
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    if (!inplace_output(request, request.inputs[i])) continue;
    pristine_[i] = std::make_unique<GuardedBuffer>(device, request.inputs[i].name, span_bytes(request.inputs[i]), seed);
    pristine_[i]->upload(sent.bytes(request.inputs[i].file));
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
        const std::string& bytes = sent.bytes(request.inputs[i].file);
        auto buffer = std::make_unique<GuardedBuffer>(device, request.inputs[i].name, bytes.size(), seed + k);
        buffer->upload(bytes);
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
          auto owned = std::make_unique<GuardedBuffer>(device, output.name, span_bytes(output), seed + k);
          buffer = owned.get();
          copy->owned.push_back(std::move(owned));
        }
        copy->outputs.push_back(buffer);
        copy->output_tensors.push_back(copies_[0]->output_tensors[o]);
        copy->output_tensors.back().data = buffer->data();
      }
    } catch (const Error&) {
      break;  // out of memory (the solution may hold some): rotate through the copies made so far
    }
    copies_.push_back(std::move(copy));
  }
}

Rotation::~Rotation() = default;

void Rotation::before_call(d2k_call& call) {
  current_ = static_cast<std::size_t>((calls_ + 1) % sets());
  Copy& copy = *copies_[current_];
  for (std::size_t i = 0; i < request_.inputs.size(); ++i) {
    if (pristine_[i]) copy.inputs[i]->copy_from(*pristine_[i]);
  }
  for (std::size_t o = 0; o < request_.outputs.size(); ++o) {
    if (!request_.outputs[o].inplace) copy.outputs[o]->fill(0xFF);
  }
  call.inputs = copy.input_tensors.data();
  call.outputs = copy.output_tensors.data();
  ++calls_;
}

void Rotation::after_call() {
  if (!request_.deterministic) return;
  ++check_.calls;
  const Copy& copy = *copies_[current_];
  bool mismatched = false;
  for (std::size_t o = 0; o < request_.outputs.size(); ++o) {
    const std::size_t differ = differing_bytes_(*copy.outputs[o], *want_[o]);
    if (differ == 0) continue;
    if (!mismatched && check_.mismatched_calls == 0) {
      check_.first_call = calls_;
      check_.first_set = static_cast<int>(current_);
      check_.first_output = request_.outputs[o].name;
      check_.first_bytes = static_cast<int64_t>(differ);
    }
    mismatched = true;
  }
  check_.mismatched_calls += mismatched;
}

void Rotation::check_inputs() {
  for (std::size_t k = 1; k < copies_.size(); ++k) {
    for (std::size_t i = 0; i < request_.inputs.size(); ++i) {
      if (pristine_[i]) continue;
      if (differing_bytes_(*copies_[k]->inputs[i], *copies_[0]->inputs[i]) != 0)
        check_.modified_inputs.push_back(fmt::format("'{}' of copy {}", request_.inputs[i].name, k));
    }
  }
}

const std::vector<GuardedBuffer*>& Rotation::last_outputs() const { return copies_[current_]->outputs; }

std::vector<const GuardedBuffer*> Rotation::buffers() const {
  std::vector<const GuardedBuffer*> out;
  for (const auto& copy : copies_) {
    for (const auto& buffer : copy->owned) out.push_back(buffer.get());
  }
  return out;
}

}  // namespace d2k
