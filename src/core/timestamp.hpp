// The current time as an ISO 8601 UTC string, for traces, transcripts and caches: one format everywhere.
#pragma once

#include <string>

namespace d2k {

// "2026-11-30T04:31:07Z", or with `milliseconds` "2026-11-30T04:31:07.123Z".
std::string utc_timestamp(bool milliseconds = false);

}  // namespace d2k
