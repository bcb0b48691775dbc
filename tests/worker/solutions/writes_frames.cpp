// Right outputs (y = x + alpha * z), and a frame of its own on the worker's evidence stream (fd 1001,
// core/worker_protocol.hpp) in every call: with D2K_TEST_FORGE=garbage, bytes that are no frame; with
// D2K_TEST_FORGE=no-token, a well-formed `end` frame with the next sequence number it can guess and
// a token of zeros. Either must make the orchestrator distrust the whole evidence stream.
#include <unistd.h>

#include <cstdint>
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

void forge() {
  const char* mode = std::getenv("D2K_TEST_FORGE");
  if (mode == nullptr) return;
  constexpr int kEvidenceFd = 1001;
  if (std::strcmp(mode, "garbage") == 0) {
    const char junk[] = "this is not a frame at all, but it is long enough to be read as a header";
    (void)!::write(kEvidenceFd, junk, sizeof junk);
    return;
  }
  const std::string fields = "{\"device_name\":\"forged\",\"guard_violations\":[]}";
  Header header;
  header.size = 4 + fields.size();
  const uint32_t fields_size = static_cast<uint32_t>(fields.size());
  std::string frame(reinterpret_cast<const char*>(&header), sizeof header);
  frame.append(reinterpret_cast<const char*>(&fields_size), 4);
  frame += fields;
  (void)!::write(kEvidenceFd, frame.data(), frame.size());
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
  forge();
  return 0;
}
