// Element types of stored tensors, and the exact conversions to float32.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace bifocal {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

std::size_t dtype_bytes(DType dtype);
// F32, F16, BF16 or F64: the types TensorView::to_float widens.
inline bool is_floating(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F64;
}
std::string_view dtype_name(DType dtype);  // the safetensors spelling: "F32", "BF16", ...
// Parses the safetensors spelling; returns false for names bifocal does not know.
bool parse_dtype(std::string_view name, DType& out);

// bf16 is the top half of an IEEE float32: widening is a shift.
inline float bf16_to_f32(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t(bits) << 16); }

// Round to nearest even, as torch does when it casts float32 to bfloat16.
inline std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((bits >> 16) | 0x40);  // keep NaN a NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::uint16_t(bits >> 16);
}

float f16_to_f32(std::uint16_t bits);

}  // namespace bifocal
