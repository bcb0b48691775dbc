#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "agent/transcript.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace d2k::agent;

namespace {

fs::path fresh_file(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("d2k-agent-transcript-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto file = dir / name;
  fs::remove(file);
  return file;
}

constexpr const char* kPrompt = R"({"seq":0,"time":"t","type":"prompt","system":"s","user":"u","tools":[]})";

}  // namespace

TEST(Transcript, AppendsNumberedRecordsAndReadsThemBack) {
  const auto file = fresh_file("a.jsonl");
  std::mt19937 random(3);
  std::vector<json> written;
  {
    TranscriptWriter writer(file);
    for (int i = 0; i < 50; ++i) {
      json r = {{"type", "x"}, {"value", static_cast<int>(random() % 1000)}, {"text", std::string(random() % 300, 'a')}};
      writer.append(r);
      written.push_back(r);
    }
  }
  {
    TranscriptWriter writer(file);  // appends after what is there
    writer.set_next_seq(50);
    writer.append({{"type", "y"}});
  }
  const auto read = read_transcript(file);
  ASSERT_EQ(read.records.size(), 51u);
  EXPECT_TRUE(read.torn.empty());
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(read.records[i].at("seq"), i);
    EXPECT_EQ(read.records[i].at("value"), written[i].at("value"));
    EXPECT_TRUE(read.records[i].contains("time"));
  }
  EXPECT_EQ(read.records[50].at("seq"), 50);
  EXPECT_EQ(read.complete_bytes, fs::file_size(file));
}

TEST(Transcript, ATornLastLineIsSetApartAndABadMiddleLineIsAnError) {
  const auto file = fresh_file("torn.jsonl");
  {
    std::ofstream out(file);
    out << kPrompt << '\n' << R"({"seq":1,"type":"request","tu)";
  }
  const auto read = read_transcript(file);
  ASSERT_EQ(read.records.size(), 1u);
  EXPECT_EQ(read.torn, R"({"seq":1,"type":"request","tu)");
  EXPECT_EQ(read.complete_bytes, std::string(kPrompt).size() + 1);

  const auto bad = fresh_file("bad.jsonl");
  {
    std::ofstream out(bad);
    out << kPrompt << '\n' << "garbage\n" << kPrompt << '\n';
  }
  try {
    read_transcript(bad);
    FAIL() << "a bad middle line was accepted";
  } catch (const d2k::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(Transcript, InvalidUtf8FromAModelIsWrittenNotThrown) {
  const auto file = fresh_file("utf8.jsonl");
  {
    TranscriptWriter writer(file);
    writer.append({{"type", "note"}, {"text", std::string("ok \xff\xfe bytes")}});
  }
  const auto read = read_transcript(file);
  ASSERT_EQ(read.records.size(), 1u);
  EXPECT_NE(read.records[0].at("text").get<std::string>().find("ok "), std::string::npos);
}

TEST(Transcript, CrashSpecCountsOccurrences) {
  set_crash_spec("tool:3");
  EXPECT_FALSE(crash_due("request"));
  EXPECT_FALSE(crash_due("tool"));
  EXPECT_FALSE(crash_due("tool"));
  EXPECT_TRUE(crash_due("tool"));
  EXPECT_FALSE(crash_due("tool"));
  set_crash_spec("");
  EXPECT_FALSE(crash_due("tool"));
}

// Issue 18 item 16: a record that is JSON but lacks what resume reads is an error naming the file, the
// line and the field, whichever record type and field it is.
TEST(Transcript, AnIncompleteRecordNamesTheFileLineAndField) {
  const json good_response = {{"seq", 2}, {"time", "t"}, {"type", "response"}, {"turn", 1}, {"text", ""},
                              {"tool_calls", json::array({{{"id", "a"}, {"name", "list_files"}, {"arguments", "{}"}}})},
                              {"usage", {{"input_tokens", 1}, {"cached_input_tokens", 0}, {"output_tokens", 1}, {"raw", nullptr}}},
                              {"cost_usd", 0.0}};
  const json good_final = {{"seq", 3}, {"time", "t"}, {"type", "final"}, {"status", "budget"}, {"reason", "r"},
                           {"solution", nullptr}, {"passed", false}, {"traces", json::array()}};
  struct Case {
    json record;
    std::string expected;
  };
  auto without = [](json r, const json::json_pointer& at) {
    r[at.parent_pointer()].erase(at.back());
    return r;
  };
  auto with = [](json r, const json::json_pointer& at, const json& value) {
    r[at] = value;
    return r;
  };
  const std::vector<Case> cases = {
      {without(good_response, "/usage/output_tokens"_json_pointer), "a response record without usage.output_tokens"},
      {without(good_response, "/turn"_json_pointer), "a response record without turn"},
      {without(good_response, "/tool_calls/0/arguments"_json_pointer), "a response record without tool_calls[0].arguments"},
      {with(good_response, "/cost_usd"_json_pointer, "free"), "a response record whose cost_usd is \"free\", not a number"},
      {without(good_response, "/type"_json_pointer), "a record without type"},
      {without(good_response, "/seq"_json_pointer), "a response record without seq"},
      {with(good_final, "/status"_json_pointer, "won"), "a final record whose status is \"won\", not a run status"},
      {without(good_final, "/passed"_json_pointer), "a final record without passed"},
      {with(good_final, "/traces"_json_pointer, json::array({{{"workload", 3}}})), "a final record whose traces: "},
      {json{{"seq", 3}, {"time", "t"}, {"type", "budget"}, {"turn", 1}, {"used", json::object()}, {"format_errors_in_a_row", 0}},
       "a budget record without used.wall_seconds"},
      {json{{"seq", 3}, {"time", "t"}, {"type", "tool_result"}, {"turn", 1}, {"index", 0}, {"id", "a"}, {"name", "n"},
            {"content", "{}"}, {"is_error", false}, {"candidate", {{"dir", "c"}}}},
       "a tool_result record without candidate.call_index"},
      // Arguments over 64 KiB are stored once, in the response record: null here, with their size.
      {json{{"seq", 3}, {"time", "t"}, {"type", "tool_call"}, {"turn", 1}, {"index", 0}, {"id", "a"}, {"name", "n"},
            {"arguments", nullptr}},
       "a tool_call record whose arguments is null with no arguments_bytes"},
  };
  for (const auto& test : cases) {
    const auto file = fresh_file("incomplete.jsonl");
    {
      std::ofstream out(file);
      out << kPrompt << '\n' << R"({"seq":1,"time":"t","type":"request","turn":1,"messages":1})" << '\n'
          << test.record.dump() << '\n' << good_final.dump() << '\n';
    }
    try {
      read_transcript(file);
      ADD_FAILURE() << "accepted: " << test.record.dump();
    } catch (const d2k::Error& e) {
      EXPECT_NE(std::string(e.what()).find(file.string() + ":3: " + test.expected), std::string::npos) << e.what();
    }
  }
  // The complete records read back.
  const auto file = fresh_file("complete.jsonl");
  {
    std::ofstream out(file);
    out << kPrompt << '\n' << good_response.dump() << '\n' << good_final.dump() << '\n';
  }
  EXPECT_EQ(read_transcript(file).records.size(), 3u);
}
