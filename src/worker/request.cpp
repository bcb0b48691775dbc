#include "worker/request.hpp"

#include <fstream>

#include "core/error.hpp"
#include "core/json.hpp"
#include "d2k/solution.h"

namespace fs = std::filesystem;

namespace d2k {
namespace {

void check_tensor(const WireTensor& tensor, std::string_view list) {
  if (tensor.shape.size() > D2K_MAX_RANK) {
    fail("{} '{}': rank {} is above D2K_MAX_RANK ({})", list, tensor.name, tensor.shape.size(), D2K_MAX_RANK);
  }
  if (tensor.strides.size() != tensor.shape.size()) {
    fail("{} '{}': {} strides for rank {}", list, tensor.name, tensor.strides.size(), tensor.shape.size());
  }
  for (std::size_t i = 0; i < tensor.shape.size(); ++i) {
    if (tensor.shape[i] < 0)
      fail("{} '{}': shape[{}] = {} is negative", list, tensor.name, i, tensor.shape[i]);
    if (tensor.strides[i] < 0) {
      fail("{} '{}': strides[{}] = {} is negative", list, tensor.name, i, tensor.strides[i]);
    }
  }
  if (tensor.file.empty()) fail("{} '{}': no file", list, tensor.name);
}

}  // namespace

int64_t span_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t span = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    span += (shape[i] - 1) * strides[i];
  }
  return span;
}

std::size_t span_bytes(const WireTensor& tensor) {
  return static_cast<std::size_t>(span_of(tensor.shape, tensor.strides)) * size_of(tensor.dtype);
}

const WireTensor* inplace_input(const WorkerRequest& request, const WireTensor& output) {
  if (!output.inplace) return nullptr;
  for (const auto& input : request.inputs) {
    if (input.name == output.name) return &input;
  }
  return nullptr;
}

bool inplace_output(const WorkerRequest& request, const WireTensor& input) {
  for (const auto& output : request.outputs) {
    if (output.inplace && output.name == input.name) return true;
  }
  return false;
}

WorkerRequest load_request(const fs::path& file) {
  std::ifstream in(file);
  if (!in) fail("cannot read the request {}", file.string());
  WorkerRequest request;
  try {
    request = nlohmann::json::parse(in).get<WorkerRequest>();
  } catch (const std::exception& error) {
    fail("{}: {}", file.string(), error.what());
  }
  try {
    if (request.library.empty()) fail("no library");
    for (const auto& input : request.inputs) check_tensor(input, "input");
    for (const auto& output : request.outputs) {
      check_tensor(output, "output");
      if (!output.inplace) continue;
      const WireTensor* input = inplace_input(request, output);
      if (input == nullptr) fail("in-place output '{}' has no input of that name", output.name);
      if (input->dtype != output.dtype || input->shape != output.shape || input->strides != output.strides) {
        fail("in-place output '{}' differs from its input in dtype, shape or strides", output.name);
      }
    }
    fs::path dir = file.parent_path();
    for (const auto& input : request.inputs) {
      std::error_code error;
      auto size = fs::file_size(dir / input.file, error);
      if (error)
        fail("input '{}': cannot read {}: {}", input.name, (dir / input.file).string(), error.message());
      if (size != span_bytes(input)) {
        fail("input '{}': {} holds {} bytes, the tensor spans {}", input.name, (dir / input.file).string(),
             size, span_bytes(input));
      }
    }
  } catch (const Error& error) {
    fail("{}: {}", file.string(), error.what());
  }
  return request;
}

}  // namespace d2k
