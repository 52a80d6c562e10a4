// parse_whole_number: the one reader of whole numbers users type (flag values, task options).
#include "core/whole_number.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace bifocal {
namespace {

TEST(WholeNumber, ReadsDecimalDigitsOnly) {
  EXPECT_EQ(parse_whole_number("0"), 0);
  EXPECT_EQ(parse_whole_number("42"), 42);
  EXPECT_EQ(parse_whole_number("007"), 7);
  EXPECT_EQ(parse_whole_number("9223372036854775807"), std::numeric_limits<std::int64_t>::max());
}

TEST(WholeNumber, RefusesSignsSpacesTrailingTextAndOverflow) {
  for (const char* bad : {"", " 1", "1 ", "+1", "-1", "12abc", "1.5", "1e3", "0x10", "a", "9223372036854775808",
                          "99999999999999999999999"})
    EXPECT_EQ(parse_whole_number(bad), std::nullopt) << "'" << bad << "'";
}

TEST(WholeNumber, IntsRefuseWhatAnIntCannotHold) {
  EXPECT_EQ(parse_whole_int("2147483647"), std::numeric_limits<int>::max());
  EXPECT_EQ(parse_whole_int("2147483648"), std::nullopt);
  EXPECT_EQ(parse_whole_int("16x"), std::nullopt);
}

}  // namespace
}  // namespace bifocal
