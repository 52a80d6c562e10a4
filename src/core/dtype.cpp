#include "bifocal/dtype.h"

#include <array>
#include <utility>

namespace bifocal {

namespace {
constexpr std::array<std::pair<DType, std::string_view>, 10> kNames{{
    {DType::F32, "F32"}, {DType::F16, "F16"}, {DType::BF16, "BF16"}, {DType::F64, "F64"},
    {DType::I64, "I64"}, {DType::I32, "I32"}, {DType::I16, "I16"}, {DType::I8, "I8"},
    {DType::U8, "U8"}, {DType::BOOL, "BOOL"},
}};
}  // namespace

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::BOOL: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  for (const auto& [d, name] : kNames)
    if (d == dtype) return name;
  return "?";
}

bool parse_dtype(std::string_view name, DType& out) {
  for (const auto& [d, n] : kNames)
    if (n == name) { out = d; return true; }
  return false;
}

// IEEE half: 1 sign, 5 exponent, 10 mantissa bits. Subnormals are normalised by hand.
float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf / NaN
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      int shift = 0;
      while ((mantissa & 0x400u) == 0) { mantissa <<= 1; ++shift; }
      mantissa &= 0x3ffu;
      bits = sign | (std::uint32_t(127 - 15 + 1 - shift) << 23) | (mantissa << 13);
    }
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace bifocal
