// What the round-2 clock patchers (ROUND2.md, class 4) share: the GOT slots through which the worker
// and the libraries it loaded call a named function, found by reading each loaded object's dynamic
// section (dl_iterate_phdr), and a write into one of them, with or without mprotect first.
#pragma once

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "memory_scan.h"

namespace got {

struct Slot {
  void** address = nullptr;
  std::string symbol;
  std::string object;  // "" is the worker's executable
};

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT, kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT, kGlobDat = R_AARCH64_GLOB_DAT;
#endif

struct Search {
  const std::vector<std::string>* symbols;
  uintptr_t own_base;
  std::vector<Slot> found;
};

inline int visit_object(dl_phdr_info* info, size_t, void* raw) {
  auto& search = *static_cast<Search*>(raw);
  const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (info->dlpi_addr == search.own_base || name.find("vdso") != std::string::npos) return 0;
  const uintptr_t base = info->dlpi_addr;
  // ld.so relocates most pointers of a dynamic section in place; an unrelocated one is below the base.
  auto at = [&](uintptr_t pointer) { return pointer < base ? pointer + base : pointer; };
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(base + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    const ElfW(Rela)*jmprel = nullptr, *rela = nullptr;
    size_t jmprel_bytes = 0, rela_bytes = 0;
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(at(dyn->d_un.d_ptr)); break;
        case DT_STRTAB: strtab = reinterpret_cast<const char*>(at(dyn->d_un.d_ptr)); break;
        case DT_JMPREL: jmprel = reinterpret_cast<const ElfW(Rela)*>(at(dyn->d_un.d_ptr)); break;
        case DT_PLTRELSZ: jmprel_bytes = dyn->d_un.d_val; break;
        case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(at(dyn->d_un.d_ptr)); break;
        case DT_RELASZ: rela_bytes = dyn->d_un.d_val; break;
        default: break;
      }
    }
    if (symtab == nullptr || strtab == nullptr) continue;
    for (auto [table, bytes] : {std::pair{jmprel, jmprel_bytes}, std::pair{rela, rela_bytes}}) {
      if (table == nullptr) continue;
      for (size_t r = 0; r < bytes / sizeof(ElfW(Rela)); ++r) {
        const uint32_t type = ELF64_R_TYPE(table[r].r_info);
        if (type != kJumpSlot && type != kGlobDat) continue;
        const char* symbol = strtab + symtab[ELF64_R_SYM(table[r].r_info)].st_name;
        for (const std::string& wanted : *search.symbols) {
          if (wanted == symbol)
            search.found.push_back({reinterpret_cast<void**>(base + table[r].r_offset), wanted, name});
        }
      }
    }
  }
  return 0;
}

// Every slot bound to one of `symbols` in every loaded object but this solution itself.
inline std::vector<Slot> slots(const std::vector<std::string>& symbols) {
  Dl_info self{};
  ::dladdr(reinterpret_cast<void*>(&slots), &self);
  Search search{&symbols, reinterpret_cast<uintptr_t>(self.dli_fbase), {}};
  ::dl_iterate_phdr(visit_object, &search);
  return search.found;
}

// Writes into a slot after making its page writable, as full RELRO left it read-only, and restores the
// page's protection after. Returns "" or what was refused.
inline std::string write_with_mprotect(void** slot, void* value) {
  const std::vector<scan::Region> all = scan::regions();
  const scan::Region* region = scan::region_of(all, slot);
  if (region != nullptr && region->writable) {  // lazy binding: the slot is writable as it is
    *slot = value;
    return "";
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~uintptr_t(page - 1));
  if (::mprotect(start, size_t(page), PROT_READ | PROT_WRITE) != 0)
    return std::string("mprotect(PROT_READ | PROT_WRITE) of the GOT page: ") + std::strerror(errno);
  *slot = value;
  ::mprotect(start, size_t(page), PROT_READ);
  return "";
}

}  // namespace got
