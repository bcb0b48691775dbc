// The API key must never reach a transcript, result.json or the terminal, and endpoints echo it: in an
// error body ("invalid key sk-..."), in a proxy's dump of the request headers. The clients pass every
// body and message through redact_key before it leaves src/llm.
#pragma once

#include <string>

namespace d2k::llm {

// `text` with every occurrence of `key` (as sent, JSON-escaped, or percent-encoded) replaced by
// "[redacted key]". A key shorter than 8 characters is left alone: it is a placeholder such as "EMPTY"
// that local servers take, and replacing it would garble ordinary text.
std::string redact_key(std::string text, const std::string& key);

// Whether a models file's api_key_env value is a key pasted where the variable's name belongs: a common
// key prefix (sk-, gsk_, xai-, hf_, AIza, ...), or 20 characters and more of letters and digits mixed
// with no underscore, which environment variable names (OPENAI_API_KEY) never are.
bool looks_like_key(const std::string& value);

}  // namespace d2k::llm
