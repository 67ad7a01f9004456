// The one syntax of numbers rackprof reads from people and URLs: decimal digits with at most
// one point ("3", "0.5", ".5"). No sign, exponent, hex, "inf" or spaces, which strtod would
// take (a URL's '+' arrives as a space).
#pragma once

#include <algorithm>
#include <string_view>

namespace rackprof::gmon {

inline bool is_plain_decimal(std::string_view text) {
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    return std::count(text.begin(), text.end(), '.') <= 1 &&
           std::any_of(text.begin(), text.end(), digit) &&
           std::all_of(text.begin(), text.end(), [&](char c) { return digit(c) || c == '.'; });
}

}  // namespace rackprof::gmon
