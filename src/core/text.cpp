#include "core/text.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace d2k {

std::string cap_text(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return valid_utf8(text);
  const std::size_t half = max_bytes / 2;
  return valid_utf8(text.substr(0, half)) + fmt::format("\n[... {} bytes cut ...]\n", text.size() - 2 * half) +
         valid_utf8(text.substr(text.size() - half));
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    uint32_t min = 0;
    if (lead < 0x80) {
      length = 1;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, min = 0x10000;
    }
    bool ok = length > 0 && i + length <= text.size();
    uint32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; ok && k < length; ++k) {
      ok = (byte(i + k) & 0xC0) == 0x80;
      code = code << 6 | (byte(i + k) & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    ok = ok && code >= min && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF);
    if (ok) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

namespace {

// Code points a terminal acts on instead of showing: C0 and C1 controls, DEL, and the bidirectional
// embeddings, overrides and isolates that reorder what follows them on the line.
bool acts_on_terminal(uint32_t code) {
  return code < 0x20 || (code >= 0x7F && code <= 0x9F) || (code >= 0x202A && code <= 0x202E) ||
         (code >= 0x2066 && code <= 0x2069) || code == 0x200E || code == 0x200F || code == 0x061C;
}

std::string escaped(uint32_t code) {
  switch (code) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return code < 0x80 ? fmt::format("\\x{:02x}", code) : fmt::format("\\u{:04x}", code);
  }
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  const std::string valid = valid_utf8(text);  // every sequence below is then well formed
  std::string out;
  std::size_t i = 0;
  while (i < valid.size() && out.size() < max_bytes) {
    const auto lead = static_cast<unsigned char>(valid[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    uint32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; k < length; ++k) code = code << 6 | (static_cast<unsigned char>(valid[i + k]) & 0x3F);
    if (acts_on_terminal(code)) out += escaped(code);
    else out.append(valid, i, length);
    i += length;
  }
  if (i < valid.size()) out += fmt::format("... ({} more bytes)", valid.size() - i);
  return out;
}

}  // namespace d2k
