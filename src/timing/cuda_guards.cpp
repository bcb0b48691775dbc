#include "timing/cuda_guards.hpp"

#ifdef D2K_WITH_CUDA
#include <fmt/format.h>

#include <vector>

#include "timing/cuda_util.hpp"

namespace d2k {
namespace {

const char* capture_status_name(cudaStreamCaptureStatus status) {
  switch (status) {
    case cudaStreamCaptureStatusNone: return "none";
    case cudaStreamCaptureStatusActive: return "active";
    case cudaStreamCaptureStatusInvalidated: return "invalidated";
  }
  return "unknown";
}

// The streams left capturing a graph, in words, into `found`: the call's stream and the per-thread default
// stream are asked directly. A blocking stream the solution made itself shows as
// cudaErrorStreamCaptureImplicit on the legacy stream; a non-blocking one of its own, capturing, records
// nothing of the harness's (which uses only the call's stream and the legacy one), and the second clock
// (cupti_clock.hpp) sees that its kernels never ran. A query that fails otherwise goes to `failed`.
template <typename Failed>
void find_captures(cudaStream_t stream, std::vector<std::string>& found, Failed&& failed) {
  const struct {
    cudaStream_t stream;
    const char* name;
  } streams[] = {{stream, "the call's stream"}, {cudaStreamPerThread, "the per-thread default stream"}};
  for (const auto& [queried, name] : streams) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (const cudaError_t error = cudaStreamIsCapturing(queried, &status); error != cudaSuccess) {
      failed(error, name);
    } else if (status != cudaStreamCaptureStatusNone) {
      found.push_back(fmt::format("{} is still capturing a graph (capture {}): the harness's own work would be "
                                  "recorded instead of run",
                                  name, capture_status_name(status)));
    }
  }
  cudaStreamCaptureStatus legacy = cudaStreamCaptureStatusNone;
  if (const cudaError_t error = cudaStreamIsCapturing(cudaStreamLegacy, &legacy);
      error == cudaErrorStreamCaptureImplicit) {
    found.push_back("a blocking stream is still capturing a graph (the legacy stream reports "
                    "cudaErrorStreamCaptureImplicit)");
  } else if (error != cudaSuccess) {
    failed(error, "the legacy stream");
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : "; ") + part;
  return text;
}

}  // namespace

void pin_no_l2_persistence() {
  const cudaError_t set = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  if (set == cudaErrorUnsupportedLimit) {
    cudaGetLastError();  // ours, not the solution's: the later pending-error check must not see it
    return;
  }
  check_cuda(set, "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0)");
  std::size_t bytes = 0;
  check_cuda(cudaDeviceGetLimit(&bytes, cudaLimitPersistingL2CacheSize), "cudaDeviceGetLimit(cudaLimitPersistingL2CacheSize)");
  if (bytes != 0) fail("cudaLimitPersistingL2CacheSize reads {} bytes after being set to 0", bytes);
}

void reset_persisting_l2() { check_cuda(cudaCtxResetPersistingL2Cache(), "cudaCtxResetPersistingL2Cache"); }

std::optional<std::string> call_left_state(cudaStream_t stream) {
  std::vector<std::string> found;
  // First, before any query of ours can set an error of its own.
  const cudaError_t pending = cudaPeekAtLastError();
  if (pending != cudaSuccess) found.push_back(fmt::format("a CUDA error is pending ({})", cuda_error_text(pending)));
  // A query that fails says so, unless with the pending error itself (a sticky one fails every call).
  auto query_failed = [&](cudaError_t error, const char* what) {
    if (error != pending) found.push_back(fmt::format("{} cannot be queried ({})", what, cuda_error_text(error)));
  };

  std::size_t persisting = 0;
  if (const cudaError_t error = cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize);
      error == cudaSuccess) {
    if (persisting > 0)
      found.push_back(fmt::format("the persisting-L2 limit (cudaLimitPersistingL2CacheSize) is {} bytes, not 0: "
                                  "lines pinned in the L2 survive the flush between calls",
                                  persisting));
  } else if (error != cudaErrorUnsupportedLimit) {  // unsupported: nothing can persist
    query_failed(error, "the persisting-L2 limit");
  }

  cudaStreamAttrValue window{};
  if (const cudaError_t error = cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &window);
      error == cudaSuccess) {
    if (window.accessPolicyWindow.num_bytes > 0)
      found.push_back(fmt::format("the call's stream has an access policy window ({} bytes at {}, hit ratio {})",
                                  window.accessPolicyWindow.num_bytes, window.accessPolicyWindow.base_ptr,
                                  window.accessPolicyWindow.hitRatio));
  } else {
    query_failed(error, "the call's stream's access policy window");
  }

  find_captures(stream, found, query_failed);

  // What our own queries raised is ours: cleared when nothing was pending before them (cudaGetLastError
  // leaves a sticky error in place, so nothing of the solution's is hidden).
  if (pending == cudaSuccess) cudaGetLastError();
  if (found.empty()) return std::nullopt;
  return join(found);
}

std::optional<std::string> capture_left_on(cudaStream_t stream) {
  std::vector<std::string> found;
  find_captures(stream, found, [](cudaError_t, const char*) {});
  if (found.empty()) return std::nullopt;
  return join(found);
}

}  // namespace d2k
#endif
