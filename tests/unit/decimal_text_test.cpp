// DecimalText (runtime/decimal_text.hpp): a number's text kept inside the
// object, every 64-bit number fits, and 0 may stand for no number.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "runtime/decimal_text.hpp"

using dlock::detail::DecimalText;

TEST(DecimalText, EveryNumberFitsAndZeroMayBeEmpty) {
    EXPECT_EQ(DecimalText(1795331927000001).view(), "1795331927000001");
    EXPECT_EQ(DecimalText(std::numeric_limits<std::uint64_t>::max()).view(),
              std::to_string(std::numeric_limits<std::uint64_t>::max()));
    EXPECT_EQ(DecimalText(0).view(), "0");
    EXPECT_EQ(DecimalText(0, true).view(), "");
    EXPECT_EQ(DecimalText(7, true).view(), "7");
}
