// bf16/fp16 conversions against values worked out by hand from the IEEE layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bifocal/dtype.h"

namespace bifocal {
namespace {

TEST(DType, Bf16WidensExactly) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x3e80), 0.25f);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3·2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): ties go up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16NormalSubnormalAndSpecial) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc400), -4.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);                 // largest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0200), std::ldexp(1.0f, -15));     // a mid subnormal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(std::signbit(f16_to_f32(0x8000)), true);
}

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16,
                  DType::I8, DType::U8, DType::BOOL}) {
    DType parsed;
    ASSERT_TRUE(parse_dtype(dtype_name(d), parsed));
    EXPECT_EQ(parsed, d);
  }
  DType unused;
  EXPECT_FALSE(parse_dtype("F8_E4M3X", unused));
}

}  // namespace
}  // namespace bifocal
