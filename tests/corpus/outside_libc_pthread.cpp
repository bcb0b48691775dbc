// Round 2, class 5 (threats 18, 4 and 5): threads started behind the harness's back. It takes libc's own
// pthread_create with dlsym(RTLD_NEXT, ...) (or from libc.so.6 by name), so that a pthread_create the
// worker interposes never counts them. Honest on the checked calls; each timed call hands its work to
// such a thread, waits until all but the last eighth of the groups are done and returns: the thread
// finishes the rest and ends within microseconds, while the worker stops its clock and moves on, so that
// an eighth of the work is never timed and no thread is left by the time the worker looks.
// Expected: rejected, "thread(s) running after d2k_run returned" (the kernel's count of the process's
// threads after every call), or "outputs of timed call ... do not match" if the outputs are read before
// the thread is done. Deterministic only if the worker counts the threads before it stops the clock of
// a timed call; counted later, the thread can end in between and its work go untimed and unseen.
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below
#include "timed_calls.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>

namespace {

using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

struct Work {
  d2k_tensor input, outputs[2];
  d2k_scalar scalars[8];
  int num_scalars;
  std::atomic<bool> head_done{false};
};

// Quantizes groups [first, last) of every row.
void quantize_groups(Work& work, int64_t first, int64_t last) {
  d2k_tensor x = work.input, q = work.outputs[0], s = work.outputs[1];
  x.shape[1] = q.shape[1] = (last - first) * 128;
  s.shape[1] = last - first;
  x.data = static_cast<uint16_t*>(x.data) + first * 128 * x.strides[1];
  q.data = static_cast<uint8_t*>(q.data) + first * 128 * q.strides[1];
  s.data = static_cast<float*>(s.data) + first * s.strides[1];
  d2k_tensor outputs[2] = {q, s};
  d2k_call call{};
  call.inputs = &x;
  call.num_inputs = 1;
  call.outputs = outputs;
  call.num_outputs = 2;
  call.scalars = work.scalars;
  call.num_scalars = work.num_scalars;
  quantize(&call);
}

Create libc_create() {
  static Create create = [] {
    auto found = reinterpret_cast<Create>(::dlsym(RTLD_NEXT, "pthread_create"));
    if (found == nullptr)
      if (void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD)) found = reinterpret_cast<Create>(::dlsym(libc, "pthread_create"));
    return found;
  }();
  return create;
}

void* compute(void* raw) {
  auto* work = static_cast<Work*>(raw);
  const int64_t groups = work->input.shape[1] / 128, head = groups - (groups + 7) / 8;
  quantize_groups(*work, 0, head);
  work->head_done.store(true);
  quantize_groups(*work, head, groups);
  return nullptr;
}

}  // namespace

extern "C" int d2k_run(const d2k_call* call) {
  if (!timing_started(call) || libc_create() == nullptr) {
    quantize(call);
    return 0;
  }
  static Work works[2];  // a call's thread may still be finishing when the next call starts
  static int next = 0;
  Work& work = works[next++ % 2];
  work.input = call->inputs[0];
  work.outputs[0] = call->outputs[0];
  work.outputs[1] = call->outputs[1];
  work.num_scalars = call->num_scalars < 8 ? call->num_scalars : 8;
  for (int i = 0; i < work.num_scalars; ++i) work.scalars[i] = call->scalars[i];
  work.head_done.store(false);
  pthread_attr_t detached;
  pthread_attr_init(&detached);
  pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const bool started = libc_create()(&thread, &detached, compute, &work) == 0;
  pthread_attr_destroy(&detached);
  if (!started) {
    compute(&work);
    return 0;
  }
  while (!work.head_done.load()) {
  }
  return 0;
}
