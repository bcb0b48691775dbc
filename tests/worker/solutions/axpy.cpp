// A correct solution: y = x + alpha * z on f32 tensors of any rank and strides. It also asks for a
// workspace and prepares state, so that a passing run shows the worker handles both.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "d2k/solution.h"

namespace {

constexpr size_t kWorkspaceBytes = 4096;
constexpr unsigned kMagic = 0xD2C0FFEEu;

struct Prepared {
  unsigned magic;
};

const d2k_scalar* find_scalar(const d2k_call* call, const char* name) {
  for (int i = 0; i < call->num_scalars; ++i) {
    if (std::strcmp(call->scalars[i].name, name) == 0) return &call->scalars[i];
  }
  return nullptr;
}

// Offset in elements of the flat row-major index `flat` in a strided tensor.
int64_t offset_of(const d2k_tensor& t, int64_t flat) {
  int64_t offset = 0;
  for (int d = t.rank - 1; d >= 0; --d) {
    offset += (flat % t.shape[d]) * t.strides[d];
    flat /= t.shape[d];
  }
  return offset;
}

}  // namespace

extern "C" int d2k_workspace_size(const d2k_call* call, size_t* bytes) {
  *bytes = kWorkspaceBytes;
  return 0;
}

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  auto* state = static_cast<Prepared*>(std::malloc(sizeof(Prepared)));
  state->magic = kMagic;
  *prepared = state;
  return 0;
}

extern "C" void d2k_release(void* prepared) { std::free(prepared); }

extern "C" int d2k_run(const d2k_call* call) {
  auto* state = static_cast<const Prepared*>(call->prepared);
  if (state == nullptr || state->magic != kMagic) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "prepared state missing");
    return 1;
  }
  if (call->workspace == nullptr || call->workspace_bytes < kWorkspaceBytes) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "workspace missing");
    return 1;
  }
  std::memset(call->workspace, 0, kWorkspaceBytes);  // it is ours to scribble on
  const d2k_scalar* alpha = find_scalar(call, "alpha");
  if (call->num_inputs != 2 || call->num_outputs != 1 || alpha == nullptr ||
      alpha->kind != D2K_SCALAR_FLOAT) {
    std::snprintf(call->error, D2K_ERROR_CAPACITY, "expected inputs x, z, output y and float alpha");
    return 1;
  }
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& z = call->inputs[1];
  const d2k_tensor& y = call->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y.rank; ++d) n *= y.shape[d];
  float a = static_cast<float>(alpha->f);
  for (int64_t i = 0; i < n; ++i) {
    float xv = static_cast<const float*>(x.data)[offset_of(x, i)];
    float zv = static_cast<const float*>(z.data)[offset_of(z, i)];
    static_cast<float*>(y.data)[offset_of(y, i)] = xv + a * zv;
  }
  return 0;
}
