// Timing one call of a kernel: cold-L2 samples, each bracketed by events on the call's stream and
// ended by a device-wide synchronization. Measures only; summarizing and printing live elsewhere.
#pragma once

#include <functional>
#include <vector>

#include "core/device.hpp"
#include "core/worker_protocol.hpp"

namespace d2k {

// Runs `call` config.warmup times untimed, then samples it until config.max_samples are in, or
// config.max_seconds have passed and config.min_samples are in. Returns one time per sample, in ms.
//  cuda: before each sample the L2 is overwritten (a memset of twice its size on `stream`); the
//        sample is the time between events recorded on `stream` around the call; the device is
//        synchronized as a whole after each sample, so no work is left running into the next one.
//        A call that hides work on another stream is charged its host wall time (timer.cpp).
//  cpu:  the caches are overwritten by writing a 64 MiB buffer; the sample is steady_clock time.
// Exceptions from `call` propagate; a CUDA failure throws d2k::Error with the error's name.
std::vector<double> measure(Device device, const std::function<void()>& call, void* stream,
                            const TimingConfig& config);

// The same, with untimed work around every call (warm-up calls included): `before` runs ahead of the
// cache flush, so whatever it writes (restoring an input, poisoning an output) is evicted before the
// call; `after` runs once the call and the device-wide synchronization are done (checking outputs).
// `right_after` runs the moment a call returns: on cuda its end event already recorded (the device not
// yet synchronized; the fixed cost of an empty sample includes it), on the cpu device before the clock
// stops (inside the sample): what must be seen before any of the call's work could end unseen (a thread
// it left). `sampling_begins` and
// `sampling_ends` run right before the first and right after the last sampled call (the outside
// clock's marks: core/worker_protocol.hpp). Any may be empty.
struct CallHooks {
  std::function<void()> before;
  std::function<void()> after;
  std::function<void()> right_after;
  std::function<void()> sampling_begins;
  std::function<void()> sampling_ends;
};
std::vector<double> measure(Device device, const std::function<void()>& call, const CallHooks& hooks,
                            void* stream, const TimingConfig& config);

}  // namespace d2k
