// The worker protocol's messages (core/worker_protocol.hpp): JSON that round-trips, and frames that
// survive being cut anywhere on the way.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/worker_protocol.hpp"

using namespace d2k;
using nlohmann::json;

TEST(WorkerProtocol, RequestRoundTrips) {
  WorkerRequest request;
  request.token = "0123456789abcdef0123456789abcdef";
  request.library = "/cache/abc/solution.so";
  request.device = Device::cuda;
  WireTensor x{.name = "x", .dtype = DType::bf16, .shape = {3, 5}, .strides = {8, 1}, .perturb = true};
  WireTensor w{.name = "w", .dtype = DType::bf16, .shape = {5}, .strides = {1}, .prepare = true};
  WireTensor y{.name = "x", .dtype = DType::bf16, .shape = {3, 5}, .strides = {8, 1}, .inplace = true};
  request.inputs = {x, w};
  request.outputs = {y};
  request.scalars = {WireScalar{"eps", false, 1e-6}, WireScalar{"k", true, 8}};
  request.time = false;
  request.timing.warmup = 7;
  request.timing.max_seconds = 2.5;
  request.timing.flush_l2 = false;
  request.timing.rotate_max_bytes = int64_t{5} << 30;
  request.deterministic = false;
  request.second_draw = false;
  request.digest_key = 0xFFFFFFFFFFFFFFF1ULL;  // all 64 bits survive JSON
  request.patch_seed = 3;
  request.patch_swaps = 4;
  request.sample_seed = 5;
  request.sampled_calls = 6;

  json j = request;
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["inputs"][0]["dtype"], "bf16");
  WorkerRequest back = j.get<WorkerRequest>();
  EXPECT_EQ(json(back), j);
  EXPECT_TRUE(back.outputs[0].inplace);
  EXPECT_TRUE(back.inputs[0].perturb);
  EXPECT_TRUE(back.inputs[1].prepare);
  EXPECT_EQ(back.inputs[0].strides, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(back.timing.rotate_max_bytes, int64_t{5} << 30);
  EXPECT_EQ(back.digest_key, 0xFFFFFFFFFFFFFFF1ULL);
  EXPECT_EQ(back.sampled_calls, 6);
  EXPECT_FALSE(back.second_draw);
}

TEST(WorkerProtocol, FailureAndTimingReportRoundTrip) {
  const WorkerFailure failure{WorkerStatus::rejected, Stage::noop_call, "outputs changed"};
  const WorkerFailure failure_back = json(failure).get<WorkerFailure>();
  EXPECT_EQ(failure_back.status, WorkerStatus::rejected);
  EXPECT_EQ(failure_back.stage, Stage::noop_call);
  EXPECT_EQ(json(failure)["stage"], "noop_call");

  TimingReport report;
  report.samples_ms = {0.125, 0.25};
  report.calls = 5;
  report.rotation_sets = 3;
  report.rotation_bytes = 267386880;
  report.noop_samples = 20;
  GpuClocks clocks;
  clocks.available = true;
  clocks.after.throttle_reasons = 0x4;
  report.clocks = clocks;
  report.second_clock = SecondClockReport{.available = true, .event_ms = {0.1, 0.2}, .busy_ms = {0.09, 0.19}, .before_calls = 1};
  json j = report;
  const TimingReport back = j.get<TimingReport>();
  EXPECT_EQ(json(back), j);
  ASSERT_TRUE(back.clocks);
  EXPECT_EQ(back.clocks->after.throttle_reasons, 0x4u);
  ASSERT_TRUE(back.second_clock);
  EXPECT_EQ(back.second_clock->busy_ms, (std::vector<double>{0.09, 0.19}));
  EXPECT_EQ(back.second_clock->before_calls, 1);
  EXPECT_THROW(json({{"stage", "nowhere"}, {"status", "ok"}, {"message", ""}}).get<WorkerFailure>(), Error);
}

TEST(WorkerProtocol, EveryStageAndMarkHasANameThatParsesBack) {
  for (int s = 0; s <= static_cast<int>(Stage::done); ++s) {
    const auto stage = static_cast<Stage>(s);
    EXPECT_EQ(parse_stage(name_of(stage)), stage) << s;
  }
  for (auto mark : {ClockMark::noop_begin, ClockMark::noop_end, ClockMark::timed_begin, ClockMark::timed_end})
    EXPECT_EQ(parse_clock_mark(name_of(mark)), mark);
  EXPECT_FALSE(parse_stage("later"));
}

TEST(WorkerProtocol, FramesAreReadWhicheverWayTheBytesAreCut) {
  Token token{};
  token[0] = 0xAB;
  token[15] = 0x01;
  std::string stream = encode_frame(FrameKind::stage, 0, token, R"({"stage":"load","seconds":0.5})");
  const std::string raw(100000, 'q');
  stream += encode_frame(FrameKind::outputs, 1, token, R"({"draw":"checked"})", raw);
  stream += encode_frame(FrameKind::end, 2, token, "{}");
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{40}, std::size_t{4096}, stream.size()}) {
    FrameReader reader(1 << 20);
    std::vector<Frame> frames;
    for (std::size_t at = 0; at < stream.size(); at += piece)
      reader.feed(stream.data() + at, std::min(piece, stream.size() - at), static_cast<double>(at), frames);
    ASSERT_FALSE(reader.broken()) << *reader.broken();
    ASSERT_EQ(frames.size(), 3u) << piece;
    EXPECT_EQ(frames[0].kind, FrameKind::stage);
    EXPECT_EQ(frames[0].fields, R"({"stage":"load","seconds":0.5})");
    EXPECT_TRUE(frames[0].raw().empty());
    EXPECT_EQ(frames[1].seq, 1u);
    EXPECT_EQ(frames[1].raw(), raw);
    EXPECT_EQ(frames[2].kind, FrameKind::end);
    EXPECT_EQ(frames[2].token, token);
    EXPECT_EQ(reader.pending(), 0u);
  }
}

TEST(WorkerProtocol, AMalformedFrameBreaksTheReaderForGood) {
  FrameReader reader(1 << 10);
  std::vector<Frame> frames;
  const std::string junk(64, 'x');
  reader.feed(junk.data(), junk.size(), 0, frames);
  ASSERT_TRUE(reader.broken());
  EXPECT_NE(reader.broken()->find("magic"), std::string::npos);
  // Too large a frame is refused at its header, before any payload is buffered.
  FrameReader small(16);
  const std::string big = encode_frame(FrameKind::outputs, 0, Token{}, "{}", std::string(100, 'r'));
  small.feed(big.data(), big.size(), 0, frames);
  ASSERT_TRUE(small.broken());
  EXPECT_NE(small.broken()->find("at most 16"), std::string::npos) << *small.broken();
  EXPECT_TRUE(frames.empty());
}

TEST(WorkerProtocol, TokensAreThirtyTwoLowercaseHexDigits) {
  const auto token = parse_token("00112233445566778899aabbccddeeff");
  ASSERT_TRUE(token);
  EXPECT_EQ((*token)[1], 0x11);
  EXPECT_EQ(token_hex(*token), "00112233445566778899aabbccddeeff");
  EXPECT_FALSE(parse_token("00112233445566778899aabbccddeef"));
  EXPECT_FALSE(parse_token("00112233445566778899aabbccddeefg"));
  EXPECT_FALSE(parse_token("00112233445566778899AABBCCDDEEFF"));
}
