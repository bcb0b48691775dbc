// Guidance markdown: items are `## L<level>.<n> <title>` headings, then `Depends on:` and `Check:`
// lines, then the rationale. Parsing keeps each item's line so every validation error can point at it.
#include "core/guidance.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/file_bytes.hpp"

namespace d2k {
namespace {

constexpr std::string_view kDependsOn = "Depends on:";
constexpr std::string_view kCheck = "Check:";
constexpr std::string_view kLevelNames[] = {"", "algorithm", "dataflow", "execution"};

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::string_view trim_right(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// A positive decimal integer without leading zeros, so that "L1.01" cannot alias "L1.1".
bool parse_positive(std::string_view digits, int& value) {
  if (digits.empty() || digits.size() > 6 || digits.front() == '0') return false;
  value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

// Parses "L<level>.<n>"; the level is any positive integer here so that the caller can say "level 4".
bool parse_id(std::string_view id, int& level, int& index) {
  if (id.size() < 4 || id.front() != 'L') return false;
  std::size_t dot = id.find('.');
  if (dot == std::string_view::npos) return false;
  return parse_positive(id.substr(1, dot - 1), level) && parse_positive(id.substr(dot + 1), index);
}

struct Located {
  GuidanceItem item;
  int line = 0;
};

class Reader {
 public:
  Reader(std::string_view text, const std::filesystem::path& file) : lines_(split_lines(text)), file_(file.string()) {}

  std::vector<Located> items() {
    std::vector<Located> found;
    bool in_fence = false;
    std::size_t start = lines_.size();
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      if (starts_with(trim(lines_[i]), "```")) in_fence = !in_fence;
      if (in_fence || !is_item_heading(lines_[i])) continue;
      if (start < lines_.size()) found.push_back(item(start, i));
      start = i;
    }
    if (start < lines_.size()) found.push_back(item(start, lines_.size()));
    return found;
  }

 private:
  static bool is_item_heading(std::string_view line) { return line == "##" || starts_with(line, "## "); }

  [[noreturn]] void error(std::size_t line_index, const std::string& what) const {
    fail("{}:{}: {}", file_, line_index + 1, what);
  }

  // One item: the heading at `begin`, its body up to `end`.
  Located item(std::size_t begin, std::size_t end) {
    Located located;
    located.line = static_cast<int>(begin) + 1;
    GuidanceItem& item = located.item;
    heading(begin, item);

    bool has_depends = false;
    bool has_check = false;
    bool in_check = false;  // a Check paragraph continues until a blank line
    std::size_t i = begin + 1;
    for (; i < end; ++i) {
      std::string_view line = trim(lines_[i]);
      if (line.empty()) {
        in_check = false;
      } else if (starts_with(line, kDependsOn)) {
        if (has_depends) error(i, fmt::format("item {} has a second '{}' line", item.id, kDependsOn));
        has_depends = true;
        in_check = false;
        item.depends_on = dependencies(i, item.id, line.substr(kDependsOn.size()));
      } else if (starts_with(line, kCheck)) {
        if (has_check) error(i, fmt::format("item {} has a second '{}' line", item.id, kCheck));
        has_check = in_check = true;
        item.check = std::string(trim(line.substr(kCheck.size())));
      } else if (in_check) {
        item.check += ' ';
        item.check += line;
      } else {
        break;  // the rationale starts here
      }
    }
    if (!has_depends) error(begin, fmt::format("item {} has no '{}' line (write 'Depends on: none' if it has none)", item.id, kDependsOn));
    if (!has_check) error(begin, fmt::format("item {} has no '{}' line", item.id, kCheck));
    if (item.check.empty()) error(begin, fmt::format("item {} has an empty '{}'", item.id, kCheck));

    std::size_t last = end;
    while (last > i && trim(lines_[last - 1]).empty()) --last;
    for (std::size_t k = i; k < last; ++k) {
      if (k > i) item.rationale += '\n';
      item.rationale += trim_right(lines_[k]);
    }
    if (item.rationale.empty()) error(begin, fmt::format("item {} has no rationale after its '{}' line", item.id, kCheck));
    return located;
  }

  void heading(std::size_t index, GuidanceItem& item) const {
    std::string_view line = lines_[index];
    std::string_view rest = trim(line.substr(2));
    std::size_t space = rest.find(' ');
    std::string_view id = rest.substr(0, space);
    int level = 0;
    int n = 0;
    if (!parse_id(id, level, n)) {
      error(index, fmt::format("malformed guidance heading '{}': expected '## L<level>.<n> <title>' with n a positive integer", line));
    }
    if (level < 1 || level > 3) error(index, fmt::format("item '{}': level {} is not 1, 2 or 3", id, level));
    std::string_view title = space == std::string_view::npos ? std::string_view{} : trim(rest.substr(space));
    if (title.empty()) error(index, fmt::format("item '{}' has no title", id));
    item.id = std::string(id);
    item.level = level;
    item.title = std::string(title);
  }

  std::vector<std::string> dependencies(std::size_t index, const std::string& id, std::string_view text) const {
    text = trim(text);
    if (text.empty()) error(index, fmt::format("item {} has an empty '{}' (write 'none')", id, kDependsOn));
    std::string lowered(text);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lowered == "none") return {};
    std::vector<std::string> ids;
    while (true) {
      std::size_t comma = text.find(',');
      std::string_view dep = trim(text.substr(0, comma));
      int level = 0;
      int n = 0;
      if (!parse_id(dep, level, n)) {
        error(index, fmt::format("item {} depends on '{}', which is not an item id like L1.2", id, dep));
      }
      if (std::find(ids.begin(), ids.end(), dep) != ids.end()) {
        error(index, fmt::format("item {} lists dependency {} twice", id, dep));
      }
      ids.emplace_back(dep);
      if (comma == std::string_view::npos) break;
      text.remove_prefix(comma + 1);
    }
    return ids;
  }

  std::vector<std::string_view> lines_;
  std::string file_;
};

void check_cycles(const std::vector<Located>& items, const std::map<std::string, std::size_t>& index_of,
                  const std::string& file) {
  enum class Mark { none, open, done };
  std::vector<Mark> marks(items.size(), Mark::none);
  std::vector<std::size_t> path;
  // Recursion depth is bounded by the number of items, a few dozen at most.
  auto visit = [&](auto&& self, std::size_t node) -> void {
    marks[node] = Mark::open;
    path.push_back(node);
    for (const auto& dep : items[node].item.depends_on) {
      std::size_t next = index_of.at(dep);
      if (marks[next] == Mark::open) {
        auto from = std::find(path.begin(), path.end(), next);
        std::string cycle;
        for (auto it = from; it != path.end(); ++it) cycle += items[*it].item.id + " -> ";
        cycle += items[next].item.id;
        fail("{}:{}: dependency cycle: {}", file, items[next].line, cycle);
      }
      if (marks[next] == Mark::none) self(self, next);
    }
    path.pop_back();
    marks[node] = Mark::done;
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (marks[i] == Mark::none) visit(visit, i);
  }
}

void validate(const std::vector<Located>& items, const std::string& file) {
  std::map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto [it, inserted] = index_of.emplace(items[i].item.id, i);
    if (!inserted) {
      fail("{}:{}: duplicate item id {} (first at line {})", file, items[i].line, items[i].item.id,
           items[it->second].line);
    }
  }
  for (const auto& [item, line] : items) {
    for (const auto& dep : item.depends_on) {
      auto found = index_of.find(dep);
      if (found == index_of.end()) fail("{}:{}: item {} depends on {}, which does not exist", file, line, item.id, dep);
      if (dep == item.id) fail("{}:{}: item {} depends on itself", file, line, item.id);
      const GuidanceItem& target = items[found->second].item;
      if (target.level > item.level) {
        fail("{}:{}: item {} (level {}) depends on {}, an item of the higher level {}", file, line, item.id,
             item.level, dep, target.level);
      }
    }
  }
  check_cycles(items, index_of, file);
  for (int level = 1; level <= 3; ++level) {
    auto count = std::count_if(items.begin(), items.end(), [&](const Located& l) { return l.item.level == level; });
    if (count < 2) {
      fail("{}: level {} ({}) has {} item{}; guidance needs at least two items at each level", file, level,
           kLevelNames[level], count, count == 1 ? "" : "s");
    }
  }
}

}  // namespace

Guidance parse_guidance(const std::string& text, const std::filesystem::path& file) {
  std::vector<Located> items = Reader(text, file).items();
  validate(items, file.string());
  Guidance guidance;
  for (auto& located : items) guidance.items.push_back(std::move(located.item));
  return guidance;
}

Guidance load_guidance(const std::filesystem::path& file) {
  const auto text = file_bytes(file);
  if (!text) fail("{}: cannot read the guidance file", file.string());
  return parse_guidance(*text, file);
}

// Levels in ascending order, and within a level a topological order that prefers file order: dependencies
// only point to the same or a lower level, so this is a dependency order of the whole selection.
std::vector<const GuidanceItem*> select_levels(const Guidance& guidance, const std::set<int>& levels) {
  for (int level : levels) {
    if (level < 1 || level > 3) fail("guidance level {} is not 1, 2 or 3", level);
  }
  std::map<std::string, int> level_of;
  for (const auto& item : guidance.items) level_of.emplace(item.id, item.level);
  std::vector<const GuidanceItem*> ordered;
  std::set<std::string> placed;
  for (int level : levels) {
    std::vector<const GuidanceItem*> pending;
    for (const auto& item : guidance.items) {
      if (item.level == level) pending.push_back(&item);
    }
    while (!pending.empty()) {
      auto ready = std::find_if(pending.begin(), pending.end(), [&](const GuidanceItem* item) {
        return std::all_of(item->depends_on.begin(), item->depends_on.end(), [&](const std::string& dep) {
          // Lower levels come first or are not selected; either way only same-level items can wait.
          auto found = level_of.find(dep);
          return placed.count(dep) > 0 || found == level_of.end() || found->second != level;
        });
      });
      if (ready == pending.end()) fail("guidance items of level {} have a dependency cycle", level);
      placed.insert((*ready)->id);
      ordered.push_back(*ready);
      pending.erase(ready);
    }
  }
  return ordered;
}

std::string render_guidance(const Guidance& guidance, const std::set<int>& levels) {
  std::string out;
  int current = 0;
  for (const GuidanceItem* item : select_levels(guidance, levels)) {
    if (item->level != current) {
      current = item->level;
      if (!out.empty()) out += '\n';
      out += fmt::format("## L{} {}\n", current, kLevelNames[current]);
    }
    std::string depends = "none";
    if (!item->depends_on.empty()) {
      depends.clear();
      for (const auto& dep : item->depends_on) depends += (depends.empty() ? "" : ", ") + dep;
    }
    out += fmt::format("\n### {} {}\nDepends on: {}\nCheck: {}\n\n{}\n", item->id, item->title, depends,
                       item->check, item->rationale);
  }
  return out;
}

}  // namespace d2k
