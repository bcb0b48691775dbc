// Threat 14, secrets: a solution that looks for the orchestrator's API keys in its environment.
// Paired with the expert d2k_run. The variables must be absent; one that is present is reported
// (by name only).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "d2k/solution.h"

extern "C" int d2k_prepare(const d2k_call* call, void** prepared) {
  *prepared = nullptr;
  std::string found;
  for (const char* name : {"D2K_TEST_SECRET", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "GITHUB_TOKEN"}) {
    if (std::getenv(name) != nullptr) found += std::string(found.empty() ? "" : ", ") + name;
  }
  if (found.empty()) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "escaped: the environment holds %s", found.c_str());
  return 1;
}

extern "C" void d2k_release(void*) {}
