#include "judge/subject.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/text.hpp"
#include "runner/sha256.hpp"

namespace d2k::judge {
namespace {

namespace fs = std::filesystem;

// The first `size` bytes of text, not ending inside a UTF-8 sequence.
std::string utf8_prefix(const std::string& text, std::size_t size) {
  if (size >= text.size()) return text;
  while (size > 0 && (static_cast<unsigned char>(text[size]) & 0xC0) == 0x80) --size;
  return text.substr(0, size);
}

// Reads the files (name, path) into a subject, the cap shared in order: a file that does not fit whole is
// cut; once the cap is spent the rest are left out, by name.
Subject read_files(Kind kind, const fs::path& source, std::vector<std::pair<std::string, fs::path>> files, std::size_t cap) {
  std::sort(files.begin(), files.end());
  Subject subject;
  subject.kind = kind;
  subject.source = source;
  Sha256 hash;
  std::size_t left = cap;
  for (const auto& [name, path] : files) {
    const auto bytes = file_bytes(path);
    if (!bytes) fail("{}: cannot read it", path.string());
    hash.update(name).update(std::string_view("\0", 1)).update(*bytes).update(std::string_view("\0", 1));
    if (left == 0) {
      subject.left_out.push_back(name);
      continue;
    }
    SubjectFile file;
    file.name = name;
    file.bytes = bytes->size();
    file.cut = bytes->size() > left;
    file.text = valid_utf8(utf8_prefix(*bytes, left));
    left -= std::min(left, bytes->size());
    subject.files.push_back(std::move(file));
  }
  subject.sha256 = hash.hex_digest();
  return subject;
}

}  // namespace

bool is_run_folder(const fs::path& path) { return fs::is_directory(path) && fs::is_regular_file(path / "run.json"); }

bool is_source_file(const fs::path& file) {
  static const std::set<std::string> kExtensions = {".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl", ".py"};
  return kExtensions.count(file.extension().string()) > 0;
}

Subject load_design(const fs::path& path, std::size_t cap) {
  fs::path file = path;
  if (is_run_folder(path)) {
    file = path / "submitted" / "design.md";
    if (!fs::is_regular_file(file))
      fail("{}: the run submitted no design (no submitted/design.md; was it a design-only run that ended with submit?)",
           path.string());
  } else if (fs::is_directory(path)) {
    file = path / "design.md";
    if (!fs::is_regular_file(file)) fail("{}: a folder without design.md (give the document, or a run folder)", path.string());
  } else if (!fs::is_regular_file(path)) {
    fail("{}: no such file or folder", path.string());
  }
  if (fs::file_size(file) == 0) fail("{}: the design is empty", file.string());
  return read_files(Kind::design, file, {{"design.md", file}}, cap);
}

Subject load_code(const fs::path& path, std::size_t cap) {
  fs::path folder = path;
  if (is_run_folder(path)) {
    folder = path / "submitted";
    // A run that ended on its budget is judged on the solution its final evaluation ran (a candidate).
    if (const auto result = file_bytes(path / "result.json")) {
      const auto document = nlohmann::json::parse(*result, nullptr, false);
      if (document.is_object() && document.contains("solution") && document["solution"].is_string())
        folder = path / document["solution"].get<std::string>();
    }
    if (!fs::is_directory(folder)) fail("{}: the run has no solution to judge (no {})", path.string(), folder.string());
  }
  std::vector<std::pair<std::string, fs::path>> files;
  if (fs::is_regular_file(folder)) {
    if (!is_source_file(folder)) fail("{}: not a source file (.cu, .cuh, .cpp, .cc, .c, .h, .hpp, .py, ...)", folder.string());
    files.emplace_back(folder.filename().string(), folder);
  } else if (fs::is_directory(folder)) {
    for (auto it = fs::recursive_directory_iterator(folder); it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_symlink()) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && is_source_file(it->path()))
        files.emplace_back(fs::relative(it->path(), folder).generic_string(), it->path());
    }
    if (files.empty()) fail("{}: no source file in it (.cu, .cuh, .cpp, .cc, .c, .h, .hpp, .py, ...)", folder.string());
  } else {
    fail("{}: no such file or folder", folder.string());
  }
  return read_files(Kind::code, folder, std::move(files), cap);
}

std::string render_subject(const Subject& subject) {
  std::string out;
  for (const auto& file : subject.files) {
    out += fmt::format("=== file: {} ===\n", file.name);
    out += file.text;
    if (!file.text.empty() && file.text.back() != '\n') out += '\n';
    if (file.cut)
      out += fmt::format("[d2k: {} cut here: {} of its {} bytes shown, over the prompt's size cap]\n", file.name,
                         file.text.size(), file.bytes);
  }
  if (!subject.left_out.empty()) {
    std::string names;
    for (const auto& name : subject.left_out) names += (names.empty() ? "" : ", ") + name;
    out += fmt::format("[d2k: not shown, over the size cap: {}]\n", names);
  }
  return out;
}

}  // namespace d2k::judge
