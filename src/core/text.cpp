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

}  // namespace d2k
