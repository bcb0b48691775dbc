#include "worker/threads.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>

namespace {

std::atomic<bool> counting{false};
std::atomic<int> running{0};

struct Start {
  void* (*routine)(void*);
  void* argument;
};

// Runs the thread's routine and uncounts it when the routine ends, also by pthread_exit or
// cancellation (both unwind through the destructor).
void* counted(void* raw) {
  const Start start = *static_cast<Start*>(raw);
  delete static_cast<Start*>(raw);
  struct Uncount {
    ~Uncount() { running.fetch_sub(1); }
  } uncount;
  return start.routine(start.argument);
}

using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

Create real_create() {
  static const Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}

}  // namespace

// Interposes libc's pthread_create for the whole process (see threads.hpp). std::thread, std::async
// and OpenMP all start their threads through it; a raw clone() does not, which the /proc/self/task
// count after each checked call still sees.
extern "C" __attribute__((visibility("default"))) int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                                                     void* (*routine)(void*), void* argument) {
  if (!counting.load()) return real_create()(thread, attr, routine, argument);
  auto* start = new Start{routine, argument};
  running.fetch_add(1);
  const int error = real_create()(thread, attr, counted, start);
  if (error != 0) {
    running.fetch_sub(1);
    delete start;
  }
  return error;
}

namespace d2k {

void start_counting_threads() { counting.store(true); }

int threads_running() { return running.load(); }

}  // namespace d2k
