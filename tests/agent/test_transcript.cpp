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
    out << R"({"seq":0,"type":"prompt"})" << '\n' << R"({"seq":1,"type":"request","tu)";
  }
  const auto read = read_transcript(file);
  ASSERT_EQ(read.records.size(), 1u);
  EXPECT_EQ(read.torn, R"({"seq":1,"type":"request","tu)");
  EXPECT_EQ(read.complete_bytes, std::string(R"({"seq":0,"type":"prompt"})").size() + 1);

  const auto bad = fresh_file("bad.jsonl");
  {
    std::ofstream out(bad);
    out << R"({"seq":0})" << '\n' << "garbage\n" << R"({"seq":2})" << '\n';
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
    writer.append({{"type", "response"}, {"text", std::string("ok \xff\xfe bytes")}});
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
