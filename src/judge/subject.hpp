// The subject of a judgement: a design document or a solution's source files, read once, capped in size,
// and shown to the judge under file names relative to the solution (never a path that could name the run,
// its model or its condition).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "judge/verdict.hpp"

namespace d2k::judge {

struct SubjectFile {
  std::string name;         // relative to the solution folder ("kernel.cu"), or "design.md"
  std::string text;         // what the judge sees: the file, valid UTF-8, cut when over the cap
  std::size_t bytes = 0;    // the file's size
  bool cut = false;         // text is only the file's first part
};

struct Subject {
  Kind kind = Kind::design;
  std::filesystem::path source;    // where it was read from (recorded; never shown to the judge)
  std::vector<SubjectFile> files;  // in name order
  std::vector<std::string> left_out;  // files not shown at all (the cap was reached before them)
  std::string sha256;              // of every file's name and full bytes, in order
};

// The most bytes of subject text one prompt carries: 128 KiB, about 32k tokens.
constexpr std::size_t kSubjectCap = 128 * 1024;

// Source files a solution can hold, by extension: CUDA, C and C++, their headers, Python (Triton).
bool is_source_file(const std::filesystem::path& file);

// A design: `path` is an agent run folder (its submitted/design.md), a folder holding design.md, or the
// document itself. Throws d2k::Error naming the path when there is none, or it is empty.
Subject load_design(const std::filesystem::path& path, std::size_t cap = kSubjectCap);

// A solution: `path` is an agent run folder (the solution its final record names, else submitted/), a
// folder of source files (read recursively, symlinks skipped), or one source file. Throws d2k::Error
// naming the path when it holds no source file.
Subject load_code(const std::filesystem::path& path, std::size_t cap = kSubjectCap);

// The subject as the prompt shows it: each file under a `=== file: <name> ===` line, a note where a file
// was cut or left out.
std::string render_subject(const Subject& subject);

// An agent run folder: it has run.json.
bool is_run_folder(const std::filesystem::path& path);

}  // namespace d2k::judge
