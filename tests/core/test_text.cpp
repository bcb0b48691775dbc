// Text from sources the harness does not control (core/text.hpp): capped, and always valid UTF-8.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

using namespace d2k;

TEST(Text, ValidUtf8KeepsWhatIsValidAndReplacesEachBadByte) {
  EXPECT_EQ(valid_utf8("plain ascii"), "plain ascii");
  EXPECT_EQ(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(valid_utf8("a\xFFz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(valid_utf8("\xC3"), "\xEF\xBF\xBD");                           // cut short
  EXPECT_EQ(valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");           // overlong
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(valid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
  // What JSON needs: dumping the result never throws.
  std::string binary;
  for (int i = 0; i < 256; ++i) binary += static_cast<char>(i);
  EXPECT_NO_THROW((void)nlohmann::json(valid_utf8(binary)).dump());
}

TEST(Text, CapTextKeepsHeadAndTailAndSaysWhatWasCut) {
  EXPECT_EQ(cap_text("short", 100), "short");
  const std::string long_text = std::string(100, 'h') + std::string(1000, 'm') + std::string(100, 't');
  const std::string capped = cap_text(long_text, 200);
  EXPECT_EQ(capped.substr(0, 100), std::string(100, 'h'));
  EXPECT_EQ(capped.substr(capped.size() - 100), std::string(100, 't'));
  EXPECT_NE(capped.find("[... 1000 bytes cut ...]"), std::string::npos);
  // A cut through a multi-byte character leaves no broken sequence behind.
  const std::string euros = std::string(9, 'a') + "\xE2\x82\xAC\xE2\x82\xAC" + std::string(9, 'b');
  EXPECT_NO_THROW((void)nlohmann::json(cap_text(euros, 20)).dump());
}

// Issue 18, item 13: text from a model or an endpoint printed on a console cannot forge a line or
// drive the terminal.
TEST(Text, PrintableEscapesWhatATerminalWouldActOn) {
  EXPECT_EQ(printable("read_file", 64), "read_file");
  EXPECT_EQ(printable("caf\xC3\xA9", 64), "caf\xC3\xA9");
  EXPECT_EQ(printable("x\n[turn 9] submit | 0 tokens", 64), "x\\n[turn 9] submit | 0 tokens");
  EXPECT_EQ(printable("\x1b[2K\r\x1b]0;owned\x07", 64), "\\x1b[2K\\r\\x1b]0;owned\\x07");
  EXPECT_EQ(printable("\xC2\x9B" "31m", 64), "\\u009b31m");              // CSI as one C1 code
  EXPECT_EQ(printable("a\xE2\x80\xAE" "cba", 64), "a\\u202ecba");        // right-to-left override
  EXPECT_EQ(printable("\x7f\t", 64), "\\x7f\\t");
  EXPECT_EQ(printable("bad\xFF", 64), "bad\xEF\xBF\xBD");
  const auto cut = printable(std::string(1000, 'n'), 40);
  EXPECT_EQ(cut, std::string(40, 'n') + "... (960 more bytes)");
  for (unsigned char c : printable(std::string("\x1b\x9b\n\r\x00", 5), 64)) EXPECT_GE(c, 0x20);
}
