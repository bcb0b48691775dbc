// Round 2, class 2 (threats 16, 6, 17 and 19): finds the token and the seq in memory and takes the
// evidence stream over. At the first timed call (the checked calls were honest) it reads every readable
// mapping (memory_scan.h) for the worker's own frame headers left in its buffers (the guessed magic,
// forge_frames.h, a plausible kind and size), which carry the token and the last seq, and for JSON "token"
// values and 32-hex-digit runs as a fallback. Then it writes the rest of the stream the worker would have
// written, with the token of the header of highest seq (else each candidate): a `samples` frame of 20
// samples at half its real time, three `outputs` frames (the sampled timed calls, its current outputs)
// and an `end` frame; and ends the process with _exit(0) before the worker writes another byte. It
// computes nothing after that, and no timed call but the first.
// Expected: rejected, "the evidence stream carried a frame the worker did not write" (the token is not in
// memory the solution can read in a form it can find, or the forged tail is caught otherwise: "... kind
// out of the expected order", or the outside clock: the samples do not explain the wall time). Were all
// of those to hold, this would pass with a forged time: the case to watch.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>

#include "forge_frames.h"
#include "memory_scan.h"

namespace {

struct Found {
  uint64_t seq = 0;
  forge::Token token;
  int headers = 0;
};

Found find_headers(std::set<std::string>& hex_tokens) {
  Found found;
  scan::each_chunk(
      [&](uintptr_t, const char* bytes, size_t n) {
        forge::token_candidates(bytes, n, hex_tokens);
        for (size_t i = 0; i + sizeof(forge::Header) <= n; i += 8) {
          forge::Header header;
          std::memcpy(&header, bytes + i, sizeof header);
          if (header.magic != forge::kMagic || header.kind < forge::kStage || header.kind > forge::kEnd ||
              header.bytes > (uint64_t{1} << 34) || header.seq > (uint64_t{1} << 20))
            continue;
          ++found.headers;
          if (found.token.empty() || header.seq >= found.seq) {
            found.seq = header.seq;
            found.token.assign(header.token, header.token + forge::kTokenBytes);
          }
        }
      },
      sizeof(forge::Header));
  return found;
}

[[noreturn]] void take_over(const d2k_call* call, double ms) {
  std::set<std::string> hex_tokens;
  const Found found = find_headers(hex_tokens);
  std::vector<forge::Token> tokens;
  if (!found.token.empty()) tokens.push_back(found.token);
  for (const std::string& hex : hex_tokens) {
    forge::Token token;
    if (forge::parse_token(hex, token) && tokens.size() < 16) tokens.push_back(token);
  }
  if (tokens.empty()) tokens.push_back(forge::Token(forge::kTokenBytes, 0));
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  std::string outputs(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
  outputs.append(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
  std::printf("cheat: found %d frame headers (last seq %llu) and %zu hex tokens; taking the stream over\n",
              found.headers, static_cast<unsigned long long>(found.seq), hex_tokens.size());
  std::fflush(stdout);
  for (const forge::Token& token : tokens) {
    uint64_t seq = found.seq + 1;
    std::string tail = forge::samples_frame(seq++, token, 20, 0.5 * ms);
    for (int i = 0; i < 3; ++i) tail += forge::outputs_frame(seq++, token, "timed", outputs.data(), outputs.size(), long(i));
    tail += forge::end_frame(seq, token);
    for (int fd : forge::writable_pipes()) forge::write_all(fd, tail);
  }
  ::_exit(0);
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  const auto start = std::chrono::steady_clock::now();
  quantize(call);
  if (timing_started(call))
    take_over(call, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
