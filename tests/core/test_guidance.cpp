// Guidance markdown: the good file parses to the expected items, each malformed file fails with its
// file:line and value, and select_levels/render_guidance put every item after its dependencies.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/error.hpp"
#include "core/guidance.hpp"

namespace d2k {
namespace {

const std::filesystem::path kData = std::filesystem::path(D2K_TEST_DATA) / "core" / "data" / "guidance";

std::vector<std::string> ids_of(const std::vector<const GuidanceItem*>& items) {
  std::vector<std::string> ids;
  for (const auto* item : items) ids.push_back(item->id);
  return ids;
}

TEST(Guidance, ParsesTheGoodFile) {
  Guidance guidance = load_guidance(kData / "good.md");
  ASSERT_EQ(guidance.items.size(), 6u);
  std::vector<std::string> ids;
  for (const auto& item : guidance.items) ids.push_back(item.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"L1.1", "L2.1", "L1.2", "L2.3", "L3.1", "L3.2"}));

  const GuidanceItem& first = guidance.items[0];
  EXPECT_EQ(first.level, 1);
  EXPECT_EQ(first.title, "Tile the key sequence");
  EXPECT_TRUE(first.depends_on.empty());
  EXPECT_EQ(first.check, "the kernel walks the keys in tiles and never materializes the full score matrix.");
  EXPECT_EQ(first.rationale,
            "The online softmax keeps a running maximum and sum, so partial results over tiles combine exactly.\n"
            "\n"
            "A second paragraph of rationale.");

  const GuidanceItem& query = guidance.items[1];
  EXPECT_EQ(query.level, 2);
  EXPECT_EQ(query.depends_on, (std::vector<std::string>{"L1.1", "L2.3"}));
  // A Check paragraph continues until a blank line.
  EXPECT_EQ(query.check, "Q is loaded once per block and kept in registers across all key tiles.");
  EXPECT_EQ(query.rationale,
            "The query tile is reused for every key tile.\n\n### A subheading inside the rationale\n\n"
            "It stays part of the rationale.");

  // A "## " line inside a code fence belongs to the rationale.
  EXPECT_NE(guidance.items[3].rationale.find("## a heading inside a fence is not an item"), std::string::npos);
  EXPECT_EQ(guidance.items[5].depends_on, (std::vector<std::string>{"L3.1", "L2.1"}));
}

TEST(Guidance, SelectsLevelsInDependencyOrder) {
  Guidance guidance = load_guidance(kData / "good.md");
  // L2.1 comes before L2.3 in the file but depends on it.
  EXPECT_EQ(ids_of(select_levels(guidance, {1, 2, 3})),
            (std::vector<std::string>{"L1.1", "L1.2", "L2.3", "L2.1", "L3.1", "L3.2"}));
  EXPECT_EQ(ids_of(select_levels(guidance, {2})), (std::vector<std::string>{"L2.3", "L2.1"}));
  EXPECT_EQ(ids_of(select_levels(guidance, {1, 3})), (std::vector<std::string>{"L1.1", "L1.2", "L3.1", "L3.2"}));
  EXPECT_TRUE(select_levels(guidance, {}).empty());
  EXPECT_THROW(select_levels(guidance, {0}), Error);
  EXPECT_THROW(select_levels(guidance, {4}), Error);
}

TEST(Guidance, RendersAHeadingPerLevelAndEveryField) {
  Guidance guidance = load_guidance(kData / "good.md");
  std::string text = render_guidance(guidance, {2, 3});
  // Level 1 is not selected: no heading and no item of it, only mentions as a dependency.
  EXPECT_EQ(text.find("## L1"), std::string::npos);
  EXPECT_EQ(text.find("### L1"), std::string::npos);
  EXPECT_EQ(text.find("## L2 dataflow\n"), 0u);
  std::size_t l23 = text.find("### L2.3 K and V tiles pass through shared memory\n");
  std::size_t l21 = text.find("### L2.1 The query tile stays in registers\n");
  std::size_t l3 = text.find("\n## L3 execution\n");
  std::size_t l31 = text.find("### L3.1 A producer warp\n");
  ASSERT_NE(l23, std::string::npos);
  ASSERT_NE(l21, std::string::npos);
  ASSERT_NE(l3, std::string::npos);
  ASSERT_NE(l31, std::string::npos);
  EXPECT_LT(l23, l21);
  EXPECT_LT(l21, l3);
  EXPECT_LT(l3, l31);
  EXPECT_NE(text.find("### L2.1 The query tile stays in registers\nDepends on: L1.1, L2.3\n"
                      "Check: Q is loaded once per block and kept in registers across all key tiles.\n\n"
                      "The query tile is reused for every key tile.\n"),
            std::string::npos)
      << text;

  Guidance small;
  small.items = {{"L1.1", 1, "First", "Because.", {}, "one read"},
                 {"L1.2", 1, "Second", "Also because.", {"L1.1"}, "two reads"}};
  EXPECT_EQ(render_guidance(small, {1}),
            "## L1 algorithm\n"
            "\n### L1.1 First\nDepends on: none\nCheck: one read\n\nBecause.\n"
            "\n### L1.2 Second\nDepends on: L1.1\nCheck: two reads\n\nAlso because.\n");
  EXPECT_EQ(render_guidance(small, {2}), "");
}

struct Malformed {
  const char* file;
  const char* fragment;
};

void PrintTo(const Malformed& c, std::ostream* os) { *os << c.file; }

class MalformedGuidance : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedGuidance, FailsNamingFileLineAndValue) {
  const Malformed& c = GetParam();
  std::string path = (kData / c.file).string();
  try {
    load_guidance(kData / c.file);
    FAIL() << c.file << " parsed";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_EQ(message.rfind(path, 0), 0u) << message;
    EXPECT_NE(message.find(c.fragment), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, MalformedGuidance,
    testing::Values(
        Malformed{"duplicate_id.md", ".md:21: duplicate item id L2.1 (first at line 15)"},
        Malformed{"unknown_dependency.md", ".md:21: item L2.2 depends on L1.7, which does not exist"},
        Malformed{"higher_level_dependency.md", ".md:9: item L1.2 (level 1) depends on L2.2, an item of the higher level 2"},
        Malformed{"cycle.md", ".md:15: dependency cycle: L2.1 -> L2.2 -> L2.1"},
        Malformed{"self_dependency.md", ".md:33: item L3.2 depends on itself"},
        Malformed{"missing_check.md", ".md:21: item L2.2 has no 'Check:' line"},
        Malformed{"missing_depends.md", ".md:27: item L3.1 has no 'Depends on:' line"},
        Malformed{"empty_rationale.md", ".md:9: item L1.2 has no rationale"},
        Malformed{"malformed_heading.md", ".md:21: malformed guidance heading '## L2-2 What is reused'"},
        Malformed{"level_out_of_range.md", ".md:33: item 'L4.2': level 4 is not 1, 2 or 3"},
        Malformed{"bad_dependency_id.md", ".md:22: item L2.2 depends on 'step one', which is not an item id"},
        Malformed{"too_few_items.md", ".md: level 3 (execution) has 1 item; guidance needs at least two"}),
    [](const testing::TestParamInfo<Malformed>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

TEST(Guidance, InlineMalformations) {
  auto message = [](const std::string& text) -> std::string {
    try {
      parse_guidance(text, "inline.md");
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string item = "Depends on: none\nCheck: c\n\nr\n";
  // Either order of the two lines is accepted: this item passes and only the count fails.
  EXPECT_NE(message("## L1.1 A\nCheck: c\nDepends on: none\n\nr\n").find("inline.md: level 1 (algorithm) has 1 item;"),
            std::string::npos);
  EXPECT_NE(message("## L1.1 A\nDepends on:\nCheck: c\n\nr\n").find("inline.md:2: item L1.1 has an empty 'Depends on:'"),
            std::string::npos);
  EXPECT_NE(message("## L1.1 A\nDepends on: none\nCheck:\n\nr\n").find("inline.md:1: item L1.1 has an empty 'Check:'"),
            std::string::npos);
  EXPECT_NE(message("## L1.01 A\n" + item).find("inline.md:1: malformed guidance heading '## L1.01 A'"),
            std::string::npos);
  EXPECT_NE(message("## L1.0 A\n" + item).find("malformed guidance heading"), std::string::npos);
  EXPECT_NE(message("## L1.1\n" + item).find("inline.md:1: item 'L1.1' has no title"), std::string::npos);
  EXPECT_NE(message("## Overview\n" + item).find("inline.md:1: malformed guidance heading '## Overview'"),
            std::string::npos);
  EXPECT_NE(message("## L1.1 A\nDepends on: L1.2, L1.2\nCheck: c\n\nr\n").find("lists dependency L1.2 twice"),
            std::string::npos);
  EXPECT_NE(message("").find("inline.md: level 1 (algorithm) has 0 items"), std::string::npos);
}

// Random guidance: a random DAG within each level (plus edges to lower levels), written in a random
// file order; parsing recovers it and select_levels puts every item after its dependencies.
TEST(Guidance, RandomGuidanceRoundTripsAndOrdersByDependency) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 50; ++round) {
    std::vector<GuidanceItem> items;
    for (int level = 1; level <= 3; ++level) {
      int count = std::uniform_int_distribution<int>(2, 7)(rng);
      std::vector<int> numbers(count);
      for (int n = 0; n < count; ++n) numbers[n] = n + 1;
      std::shuffle(numbers.begin(), numbers.end(), rng);  // numbers[k] comes k-th in dependency order
      std::size_t lower = items.size();
      for (int k = 0; k < count; ++k) {
        GuidanceItem item;
        item.level = level;
        item.id = "L" + std::to_string(level) + "." + std::to_string(numbers[k]);
        item.title = "Item " + item.id;
        item.check = "check of " + item.id;
        item.rationale = "Why " + item.id + ".\n\nMore.";
        for (int j = 0; j < k; ++j) {
          if (rng() % 3 == 0) item.depends_on.push_back("L" + std::to_string(level) + "." + std::to_string(numbers[j]));
        }
        for (std::size_t j = 0; j < lower; ++j) {
          if (rng() % 5 == 0) item.depends_on.push_back(items[j].id);
        }
        items.push_back(item);
      }
    }
    std::shuffle(items.begin(), items.end(), rng);
    std::string text = "# Guidance: random\n\n";
    for (const auto& item : items) {
      std::string deps;
      for (const auto& dep : item.depends_on) deps += (deps.empty() ? "" : ", ") + dep;
      text += "## " + item.id + " " + item.title + "\nDepends on: " + (deps.empty() ? "none" : deps) +
              "\nCheck: " + item.check + "\n\n" + item.rationale + "\n\n";
    }
    Guidance guidance = parse_guidance(text, "random.md");
    ASSERT_EQ(guidance.items.size(), items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(guidance.items[i].id, items[i].id);
      EXPECT_EQ(guidance.items[i].title, items[i].title);
      EXPECT_EQ(guidance.items[i].depends_on, items[i].depends_on);
      EXPECT_EQ(guidance.items[i].check, items[i].check);
      EXPECT_EQ(guidance.items[i].rationale, items[i].rationale);
    }
    for (const std::set<int>& levels : {std::set<int>{1, 2, 3}, std::set<int>{2, 3}, std::set<int>{3}}) {
      std::vector<const GuidanceItem*> order = select_levels(guidance, levels);
      std::map<std::string, std::size_t> position;
      for (std::size_t i = 0; i < order.size(); ++i) position[order[i]->id] = i;
      std::size_t expected = std::count_if(items.begin(), items.end(),
                                           [&](const GuidanceItem& item) { return levels.count(item.level) > 0; });
      ASSERT_EQ(order.size(), expected);
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (i > 0) EXPECT_LE(order[i - 1]->level, order[i]->level);
        for (const auto& dep : order[i]->depends_on) {
          if (position.count(dep)) EXPECT_LT(position[dep], i) << order[i]->id << " before " << dep;
        }
      }
    }
  }
}

TEST(Guidance, TiesKeepFileOrder) {
  std::string text;
  // File order L1.3, L1.1, L1.2; only L1.3 -> L1.2 constrains; L1.1 is free and comes first in file
  // order among what is ready.
  for (auto [id, deps] : {std::pair{"L1.3", "L1.2"}, std::pair{"L1.1", "none"}, std::pair{"L1.2", "none"},
                          std::pair{"L2.2", "none"}, std::pair{"L2.1", "none"}, std::pair{"L3.1", "none"},
                          std::pair{"L3.2", "L3.1"}}) {
    text += fmt::format("## {} t\nDepends on: {}\nCheck: c\n\nr\n\n", id, deps);
  }
  Guidance guidance = parse_guidance(text, "ties.md");
  EXPECT_EQ(ids_of(select_levels(guidance, {1, 2, 3})),
            (std::vector<std::string>{"L1.1", "L1.2", "L1.3", "L2.2", "L2.1", "L3.1", "L3.2"}));
}

}  // namespace
}  // namespace d2k
