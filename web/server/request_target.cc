#include "web/server/request_target.h"

namespace rackprof::web::server {

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+' && plus_is_space) {
            out += ' ';
        } else if (text[i] != '%') {
            out += text[i];
        } else {
            if (i + 2 >= text.size()) return std::nullopt;
            const int hi = hex_digit(text[i + 1]);
            const int lo = hex_digit(text[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        }
    }
    return out;
}

std::optional<std::map<std::string, std::string>> query_values(std::string_view target,
                                                               std::string* why) {
    std::map<std::string, std::string> out;
    const auto q = target.find('?');
    if (q == std::string_view::npos) return out;
    std::string_view query = target.substr(q + 1, target.find('#', q) - q - 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        const auto eq = pair.find('=');
        auto name = percent_decode(pair.substr(0, eq), true);
        auto value = percent_decode(
            eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
        if (!name || !value) {
            if (why) *why = "a bad %-escape (% must be followed by two hex digits)";
            return std::nullopt;
        }
        if (!out.emplace(std::move(*name), std::move(*value)).second) {
            if (why) *why = "'" + std::string(pair.substr(0, eq)) + "' given twice";
            return std::nullopt;
        }
        if (amp == std::string_view::npos) break;
        query = query.substr(amp + 1);
    }
    return out;
}

}  // namespace rackprof::web::server
