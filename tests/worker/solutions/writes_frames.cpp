// Right outputs (y = x + alpha * z), after trying to write a frame of its own on the worker's evidence
// stream (fd 1001, core/worker_protocol.hpp) in every call: with D2K_TEST_FORGE=garbage, bytes that are
// no frame; with D2K_TEST_FORGE=no-token, a well-formed `end` frame with a token of zeros. The worker's
// seccomp filter refuses every write to that descriptor but the worker's own (worker/evidence_write.hpp):
// the call fails, with the errno in its message, if the write went through, or if it failed otherwise.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "d2k/solution.h"

namespace {

struct Header {
  uint32_t magic = 0x324b3244;  // "D2K2"
  uint32_t kind = 16;           // end
  uint64_t seq = 1;
  uint64_t size = 0;
  uint8_t token[16] = {};
};

// 0 when the write was refused as it must be; otherwise what happened.
int forge(char* error) {
  const char* mode = std::getenv("D2K_TEST_FORGE");
  if (mode == nullptr) return 0;
  constexpr int kEvidenceFd = 1001;
  std::string frame;
  if (std::strcmp(mode, "garbage") == 0) {
    frame = "this is not a frame at all, but it is long enough to be read as a header";
  } else {
    const std::string fields = "{\"device_name\":\"forged\",\"guard_violations\":[]}";
    Header header;
    header.size = 4 + fields.size();
    const uint32_t fields_size = static_cast<uint32_t>(fields.size());
    frame.assign(reinterpret_cast<const char*>(&header), sizeof header);
    frame.append(reinterpret_cast<const char*>(&fields_size), 4);
    frame += fields;
  }
  const ssize_t n = ::write(kEvidenceFd, frame.data(), frame.size());
  if (n < 0 && errno == EPERM) return 0;
  std::snprintf(error, D2K_ERROR_CAPACITY, "the forged frame: write returned %zd (%s)", n,
                n < 0 ? std::strerror(errno) : "written");
  return 1;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const d2k_tensor& x = call->inputs[0];
  const d2k_tensor& z = call->inputs[1];
  const d2k_tensor& y = call->outputs[0];
  float alpha = static_cast<float>(call->scalars[0].f);
  for (int64_t i = 0; i < y.shape[0]; ++i) {
    for (int64_t j = 0; j < y.shape[1]; ++j) {
      float xv = static_cast<const float*>(x.data)[i * x.strides[0] + j * x.strides[1]];
      float zv = static_cast<const float*>(z.data)[i * z.strides[0] + j * z.strides[1]];
      static_cast<float*>(y.data)[i * y.strides[0] + j * y.strides[1]] = xv + alpha * zv;
    }
  }
  return forge(call->error);
}
