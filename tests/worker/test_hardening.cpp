// Full RELRO and immediate binding for d2k-worker and d2k-sandbox (src/CMakeLists.txt, d2k_hardened):
// read from the built files' ELF headers, and tried at run time by a library preloaded into the worker
// that writes one of its GOT slots before main (hardening/got_probe.cpp). A control program linked with
// the linker's defaults (hardening/lazy_program.cpp) shows that both checks can fail.
#include <elf.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runner/process.hpp"

using namespace d2k;

namespace {

// What the file's headers say about its hardening.
struct Hardening {
  std::string error;  // not a 64-bit little-endian ELF file, or cut short
  bool pie = false;   // ET_DYN with DF_1_PIE
  bool relro = false;  // a PT_GNU_RELRO segment
  bool bind_now = false;  // DT_BIND_NOW, DF_BIND_NOW in DT_FLAGS or DF_1_NOW in DT_FLAGS_1
};

Hardening read_hardening(const std::string& path) {
  Hardening result;
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto fits = [&](std::size_t offset, std::size_t size) { return offset <= bytes.size() && size <= bytes.size() - offset; };
  Elf64_Ehdr header{};
  if (!fits(0, sizeof header)) return {path + ": shorter than an ELF header"};
  std::memcpy(&header, bytes.data(), sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB)
    return {path + ": not a 64-bit little-endian ELF file"};
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (header.e_phentsize != sizeof(Elf64_Phdr) || !fits(header.e_phoff, segments.size() * sizeof(Elf64_Phdr)))
    return {path + ": program headers out of the file"};
  std::memcpy(segments.data(), bytes.data() + header.e_phoff, segments.size() * sizeof(Elf64_Phdr));
  uint64_t flags_1 = 0;
  for (const Elf64_Phdr& segment : segments) {
    if (segment.p_type == PT_GNU_RELRO) result.relro = true;
    if (segment.p_type != PT_DYNAMIC) continue;
    if (!fits(segment.p_offset, segment.p_filesz)) return {path + ": dynamic section out of the file"};
    for (std::size_t at = 0; at + sizeof(Elf64_Dyn) <= segment.p_filesz; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry{};
      std::memcpy(&entry, bytes.data() + segment.p_offset + at, sizeof entry);
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag == DT_BIND_NOW) result.bind_now = true;
      if (entry.d_tag == DT_FLAGS && (entry.d_un.d_val & DF_BIND_NOW) != 0) result.bind_now = true;
      if (entry.d_tag == DT_FLAGS_1) flags_1 = entry.d_un.d_val;
    }
  }
  if ((flags_1 & DF_1_NOW) != 0) result.bind_now = true;
  result.pie = header.e_type == ET_DYN && (flags_1 & DF_1_PIE) != 0;
  return result;
}

// Runs `program` with the GOT probe preloaded.
ProcessResult run_probed(const std::string& program) {
  ProcessSpec spec;
  spec.argv = {program, "--help"};
  spec.env = {{"LD_PRELOAD", D2K_GOT_PROBE_PATH}, {"D2K_GOT_PROBE", "1"}};
  spec.timeout_seconds = 30;
  return run_process(spec);
}

}  // namespace

TEST(Hardening, WorkerAndSandboxAreFullRelroBindNowPie) {
  for (const char* path : {D2K_WORKER_PATH, D2K_SANDBOX_PATH}) {
    const Hardening hardening = read_hardening(path);
    ASSERT_EQ(hardening.error, "");
    EXPECT_TRUE(hardening.relro) << path << " has no PT_GNU_RELRO segment";
    EXPECT_TRUE(hardening.bind_now) << path << " binds lazily (neither DF_BIND_NOW nor DF_1_NOW)";
    EXPECT_TRUE(hardening.pie) << path << " is not a position-independent executable";
  }
}

TEST(Hardening, TheElfCheckFindsALazyProgram) {
  const Hardening hardening = read_hardening(D2K_LAZY_PROGRAM_PATH);
  ASSERT_EQ(hardening.error, "");
  EXPECT_FALSE(hardening.bind_now);
  EXPECT_NE(read_hardening(D2K_TEST_DATA "/worker/test_hardening.cpp").error, "");
}

TEST(Hardening, TheWorkersGotIsNotWritable) {
  const ProcessResult result = run_probed(D2K_WORKER_PATH);
  // The probe found slots, none of them writable, and its write killed the worker.
  EXPECT_NE(result.output.find("got-probe: "), std::string::npos) << "the probe did not run: " << result.output;
  EXPECT_EQ(result.output.find("got-probe: 0 slots"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(" slots, 0 writable"), std::string::npos) << result.output;
  EXPECT_EQ(result.end, ProcessResult::End::signaled) << result.describe() << "\n" << result.output;
  EXPECT_EQ(result.signal, SIGSEGV) << result.describe();
}

TEST(Hardening, TheProbeWritesALazyProgramsGot) {
  const ProcessResult result = run_probed(D2K_LAZY_PROGRAM_PATH);
  EXPECT_NE(result.output.find("got-probe: wrote a GOT slot"), std::string::npos) << result.output;
  EXPECT_EQ(result.end, ProcessResult::End::exited) << result.describe();
  EXPECT_EQ(result.exit_code, 3) << result.output;
}
