// Names of dtypes, devices and trace statuses: the spellings task.toml, JSON and the CLI use.
#include <gtest/gtest.h>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/trace.hpp"

namespace d2k {
namespace {

TEST(DType, NamesSizesAndKindsMatchTheFormat) {
  struct Expected {
    DType dtype;
    const char* name;
    std::size_t size;
    bool floating;
  };
  const Expected all[] = {
      {DType::f32, "f32", 4, true},   {DType::f16, "f16", 2, true}, {DType::bf16, "bf16", 2, true},
      {DType::f8e4m3, "f8e4m3", 1, true}, {DType::i32, "i32", 4, false}, {DType::i64, "i64", 8, false},
      {DType::i8, "i8", 1, false},    {DType::u8, "u8", 1, false},  {DType::f64, "f64", 8, true},
  };
  for (const auto& expected : all) {
    EXPECT_EQ(name_of(expected.dtype), expected.name);
    EXPECT_EQ(size_of(expected.dtype), expected.size) << expected.name;
    EXPECT_EQ(is_floating(expected.dtype), expected.floating) << expected.name;
    EXPECT_EQ(parse_dtype(expected.name), expected.dtype) << expected.name;
  }
}

TEST(DType, AbiValuesAreTheHeaderValues) {
  EXPECT_EQ(to_abi(DType::f32), D2K_FLOAT32);
  EXPECT_EQ(to_abi(DType::bf16), D2K_BFLOAT16);
  EXPECT_EQ(to_abi(DType::f8e4m3), D2K_FLOAT8_E4M3);
  EXPECT_EQ(to_abi(DType::u8), D2K_UINT8);
  EXPECT_EQ(to_abi(DType::f64), D2K_FLOAT64);
}

TEST(DType, RejectsOtherSpellings) {
  for (const char* name : {"float32", "F32", "bfloat16", "fp8", "int32", "", "f32 "}) {
    EXPECT_FALSE(parse_dtype(name).has_value()) << name;
  }
}

TEST(Device, RoundTrips) {
  for (Device device : {Device::cuda, Device::cpu}) EXPECT_EQ(parse_device(name_of(device)), device);
  EXPECT_EQ(name_of(Device::cuda), "cuda");
  EXPECT_EQ(name_of(Device::cpu), "cpu");
  EXPECT_FALSE(parse_device("gpu").has_value());
  EXPECT_FALSE(parse_device("CUDA").has_value());
}

TEST(Status, NamesAreTheEnumSpellings) {
  const std::pair<Status, const char*> all[] = {
      {Status::passed, "passed"},
      {Status::incorrect_shape, "incorrect_shape"},
      {Status::incorrect_dtype, "incorrect_dtype"},
      {Status::incorrect_numerics, "incorrect_numerics"},
      {Status::compile_error, "compile_error"},
      {Status::runtime_error, "runtime_error"},
      {Status::timeout, "timeout"},
      {Status::rejected, "rejected"},
  };
  for (const auto& [status, name] : all) {
    EXPECT_EQ(name_of(status), name);
    EXPECT_EQ(parse_status(name), status) << name;
  }
  EXPECT_FALSE(parse_status("incorrect numerics").has_value());
  EXPECT_FALSE(parse_status("failed").has_value());
}

}  // namespace
}  // namespace d2k
