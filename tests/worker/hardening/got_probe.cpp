// Preloaded (LD_PRELOAD) into an executable by tests/worker/test_hardening.cpp, with D2K_GOT_PROBE=1 in
// its environment: before the executable's main runs, but after the dynamic linker has relocated it
// and applied its RELRO, this finds the executable's GOT slots (the targets of its GLOB_DAT and
// JUMP_SLOT relocations), says how many there are and how many sit in writable pages, then writes one
// slot (its own value back) the way a solution redirecting steady_clock::now would: a writable one if
// there is any, else the first. Under full RELRO that write ends the process with SIGSEGV; otherwise
// the probe exits with kWroteSlot.
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kWroteSlot = 3;
constexpr int kNoSlots = 4;

struct Program {
  ElfW(Addr) base = 0;
  const ElfW(Phdr)* headers = nullptr;
  int count = 0;
};

int first_object(dl_phdr_info* info, size_t, void* out) {
  auto* program = static_cast<Program*>(out);
  program->base = info->dlpi_addr;
  program->headers = info->dlpi_phdr;
  program->count = info->dlpi_phnum;
  return 1;  // the first object listed is the executable
}

// glibc stores the dynamic section's addresses relocated on x86-64; an unrelocated one is an offset.
uintptr_t address(ElfW(Addr) base, ElfW(Addr) pointer) { return pointer >= base ? pointer : base + pointer; }

// Whether `where` lies in a writable mapping, from /proc/self/maps.
bool writable(uintptr_t where) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return true;  // unknown counts against the executable
  char line[512];
  bool result = false;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3) continue;
    if (where >= start && where < end) {
      result = perms[1] == 'w';
      break;
    }
  }
  std::fclose(maps);
  return result;
}

void say(const char* text) { (void)!::write(2, text, std::strlen(text)); }

__attribute__((constructor)) void probe() {
  const char* asked = std::getenv("D2K_GOT_PROBE");
  if (asked == nullptr || std::strcmp(asked, "1") != 0) return;
  Program program;
  dl_iterate_phdr(first_object, &program);
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < program.count; ++i)
    if (program.headers[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(program.base + program.headers[i].p_vaddr);
  if (dynamic == nullptr) {
    say("got-probe: the executable has no dynamic section\n");
    ::_exit(kNoSlots);
  }
  uintptr_t tables[2] = {0, 0};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
    if (entry->d_tag == DT_RELA) tables[0] = address(program.base, entry->d_un.d_ptr);
    if (entry->d_tag == DT_RELASZ) sizes[0] = entry->d_un.d_val;
    if (entry->d_tag == DT_JMPREL) tables[1] = address(program.base, entry->d_un.d_ptr);
    if (entry->d_tag == DT_PLTRELSZ) sizes[1] = entry->d_un.d_val;
  }
  int slots = 0, open = 0;
  uintptr_t first = 0, first_open = 0;
  for (int t = 0; t < 2; ++t) {
    const auto* relocations = reinterpret_cast<const ElfW(Rela)*>(tables[t]);
    for (size_t i = 0; tables[t] != 0 && i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const auto type = ELF64_R_TYPE(relocations[i].r_info);
      if (type != R_X86_64_GLOB_DAT && type != R_X86_64_JUMP_SLOT) continue;
      const uintptr_t slot = program.base + relocations[i].r_offset;
      ++slots;
      const bool is_open = writable(slot);
      open += is_open ? 1 : 0;
      if (first == 0) first = slot;
      if (is_open && first_open == 0) first_open = slot;
    }
  }
  char line[128];
  std::snprintf(line, sizeof line, "got-probe: %d slots, %d writable\n", slots, open);
  say(line);
  if (first == 0) ::_exit(kNoSlots);
  volatile uintptr_t* target = reinterpret_cast<volatile uintptr_t*>(first_open != 0 ? first_open : first);
  *target = *target;
  say("got-probe: wrote a GOT slot\n");
  ::_exit(kWroteSlot);
}

}  // namespace
