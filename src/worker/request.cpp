#include "worker/request.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/json.hpp"
#include "d2k/solution.h"

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
}

}  // namespace

void check_request(const WorkerRequest& request) {
  if (request.library.empty()) fail("no library");
  if (!parse_token(request.token)) fail("the token is not 32 hex digits");
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
  if (request.seeded_calls > 0) {
    const auto is_seed = [&](const WireScalar& s) { return s.name == request.seed_scalar && s.is_int; };
    if (std::none_of(request.scalars.begin(), request.scalars.end(), is_seed))
      fail("the seeded calls' seed '{}' is not an int scalar of the request", request.seed_scalar);
  }
}

}  // namespace d2k
