// Round 2, class 4 (threat 19): overwrites the worker's copies of the checked outputs. The checked calls
// compute honestly and it keeps their outputs; at the first timed call it reads every readable mapping
// (memory_scan.h) for other copies of those bytes (where the first round's worker kept the reference that
// timed calls were compared with: a download buffer, a host copy of the expected bytes) and overwrites
// each one in writable memory with 0xFF, the poison its timed calls leave, since from then on it computes
// nothing. The log says how many copies it found and overwrote.
// Expected: rejected, "outputs of timed call ... do not match" (the worker holds no expected bytes: the
// sampled timed calls' outputs go to the orchestrator, which checks them against its own oracle).
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <cstdio>
#include <string>
#include <vector>

#include "memory_scan.h"

namespace {

std::string checked_q, checked_s;

bool inside(uintptr_t at, const std::string& bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  return at >= begin && at < begin + bytes.size();
}

// Finds the copies of `bytes` (by a prefix of up to 256 bytes, then in full) outside its own buffers and
// the call's outputs, and overwrites those in writable memory with 0xFF. Returns {found, overwritten}.
std::pair<int, int> overwrite_copies(const std::string& bytes, const d2k_call* call) {
  const size_t prefix = std::min<size_t>(256, bytes.size());
  std::vector<uintptr_t> hits;
  scan::each_chunk(
      [&](uintptr_t at, const char* chunk, size_t n) {
        for (const char* p = chunk; (p = static_cast<const char*>(::memmem(p, n - size_t(p - chunk), bytes.data(), prefix)));
             ++p)
          hits.push_back(at + uintptr_t(p - chunk));
      },
      prefix);
  int found = 0, overwritten = 0;
  const std::vector<scan::Region> all = scan::regions();
  for (uintptr_t at : hits) {
    if (inside(at, checked_q) || inside(at, checked_s)) continue;
    bool output = false;
    for (int i = 0; i < call->num_outputs; ++i) output = output || at == reinterpret_cast<uintptr_t>(call->outputs[i].data);
    const scan::Region* region = scan::region_of(all, reinterpret_cast<void*>(at));
    if (output || region == nullptr || !region->readable || at + bytes.size() > region->end) continue;
    if (std::memcmp(reinterpret_cast<const void*>(at), bytes.data(), bytes.size()) != 0) continue;
    ++found;
    if (!region->writable) continue;
    std::memset(reinterpret_cast<void*>(at), 0xFF, bytes.size());
    ++overwritten;
  }
  return {found, overwritten};
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  static bool patched = false;
  const d2k_tensor &q = call->outputs[0], &s = call->outputs[1];
  if (!timing_started(call)) {
    quantize(call);
    checked_q.assign(static_cast<const char*>(q.data), size_t(span_bytes(q, 1)));
    checked_s.assign(static_cast<const char*>(s.data), size_t(span_bytes(s, 4)));
    return 0;
  }
  if (!patched) {
    patched = true;
    const auto [q_found, q_overwritten] = overwrite_copies(checked_q, call);
    const auto [s_found, s_overwritten] = overwrite_copies(checked_s, call);
    std::printf("cheat: found %d copies of q (%d overwritten) and %d of the scales (%d overwritten)\n", q_found,
                q_overwritten, s_found, s_overwritten);
    std::fflush(stdout);
  }
  return 0;  // the timed calls: nothing
}
