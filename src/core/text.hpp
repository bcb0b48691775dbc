// Text the harness shows to people or writes into JSON, from sources it does not control (a solution's
// log, a compiler's output, a model's reply).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace d2k {

// At most about `max_bytes`: the first and the last half, with how many bytes were cut between them
// (the head says what started failing, the tail how it ended); valid UTF-8 (below) either way.
std::string cap_text(std::string_view text, std::size_t max_bytes);

// `text` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD: a log
// with stray bytes (a solution printing binary, on purpose or not) must not break the JSON it goes into.
std::string valid_utf8(std::string_view text);

// `text` fit for one line of a terminal: control characters (newlines, ESC and the escape sequences it
// starts, C1 codes such as CSI) and bidirectional overrides are shown escaped (\n, \x1b, \u009b,
// \u202e), so that a name or message from a model or an endpoint can neither forge console lines nor
// drive the terminal; cut after about max_bytes with "..." and how many bytes were left out.
std::string printable(std::string_view text, std::size_t max_bytes);

}  // namespace d2k
