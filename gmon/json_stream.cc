#include "gmon/json_stream.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

namespace rackprof::gmon {

JsonStream::JsonStream(std::string& out, int indent, int depth, ErrorHandler on_bad_utf8)
    : out_(out),
      indent_(indent),
      on_bad_utf8_(on_bad_utf8),
      base_depth_(static_cast<std::size_t>(depth)) {}

JsonStream& JsonStream::begin_object() {
    begin('{');
    return *this;
}

JsonStream& JsonStream::end_object() {
    end('}');
    return *this;
}

JsonStream& JsonStream::begin_array() {
    begin('[');
    return *this;
}

JsonStream& JsonStream::end_array() {
    end(']');
    return *this;
}

JsonStream& JsonStream::key(std::string_view name) {
    before_value();
    string(name);
    out_ += ':';
    if (indent_ >= 0) out_ += ' ';
    after_key_ = true;
    return *this;
}

JsonStream& JsonStream::value(std::string_view s) {
    before_value();
    string(s);
    return *this;
}

JsonStream& JsonStream::value(double x) {
    before_value();
    append_number(out_, x);
    return *this;
}

void JsonStream::append_number(std::string& out, double x) {
    std::array<char, kMaxNumberChars> buffer;
    out.append(buffer.data(),
               static_cast<std::size_t>(write_number(buffer.data(), x) - buffer.data()));
}

char* JsonStream::write_number(char* at, double x) {
    if (!std::isfinite(x)) {
        std::memcpy(at, "null", 4);
        return at + 4;
    }
    // nlohmann's own shortest round-trip formatting (Grisu2, "1.0" for whole numbers), called
    // directly: std::to_chars differs on whole numbers and may pick other digits.
    return nlohmann::detail::to_chars(at, at + kMaxNumberChars, x);
}

JsonStream& JsonStream::value(std::uint64_t n) {
    before_value();
    append_number(out_, n);
    return *this;
}

void JsonStream::append_number(std::string& out, std::uint64_t n) {
    std::array<char, kMaxNumberChars> buffer;
    out.append(buffer.data(),
               static_cast<std::size_t>(write_number(buffer.data(), n) - buffer.data()));
}

char* JsonStream::write_number(char* at, std::uint64_t n) {
    return std::to_chars(at, at + kMaxNumberChars, n).ptr;
}

JsonStream& JsonStream::value(std::int64_t n) {
    before_value();
    std::array<char, 24> buffer;
    const char* end = std::to_chars(buffer.data(), buffer.data() + buffer.size(), n).ptr;
    out_.append(buffer.data(), static_cast<std::size_t>(end - buffer.data()));
    return *this;
}

JsonStream& JsonStream::value(bool b) {
    before_value();
    out_ += b ? "true" : "false";
    return *this;
}

JsonStream& JsonStream::value(std::nullptr_t) {
    before_value();
    out_ += "null";
    return *this;
}

JsonStream& JsonStream::value(const nlohmann::json& document) {
    before_value();
    const std::string text = document.dump(indent_, ' ', false, on_bad_utf8_);
    if (indent_ <= 0) {
        out_ += text;
        return *this;
    }
    // dump() indents from column 0; every line after the first moves to this depth. (A newline
    // inside a JSON string is always escaped, so every '\n' is a line break.)
    const std::string margin(
        static_cast<std::size_t>(indent_) * (base_depth_ + has_element_.size()), ' ');
    for (char c : text) {
        out_ += c;
        if (c == '\n') out_ += margin;
    }
    return *this;
}

void JsonStream::begin(char bracket) {
    before_value();
    out_ += bracket;
    has_element_.push_back(0);
}

void JsonStream::end(char bracket) {
    // An empty container is "{}" / "[]" even when indenting, as dump() prints it.
    if (has_element_.back() && indent_ >= 0)
        newline_and_indent(base_depth_ + has_element_.size() - 1);
    out_ += bracket;
    has_element_.pop_back();
}

void JsonStream::before_value() {
    if (after_key_) {  // an object member: key() placed it
        after_key_ = false;
        return;
    }
    if (has_element_.empty()) return;  // the document itself
    if (has_element_.back()) out_ += ',';
    has_element_.back() = 1;
    if (indent_ >= 0) newline_and_indent(base_depth_ + has_element_.size());
}

void JsonStream::newline_and_indent(std::size_t depth) {
    out_ += '\n';
    out_.append(static_cast<std::size_t>(indent_) * depth, ' ');
}

void JsonStream::string(std::string_view s) {
    // Printable ASCII without quote or backslash is written as is; anything else (escapes,
    // UTF-8, bytes that are not UTF-8) goes through nlohmann so its rules stay the only ones.
    static constexpr std::array<bool, 256> kPlain = [] {
        std::array<bool, 256> t{};
        for (unsigned u = 0x20; u < 0x80; ++u) t[u] = u != '"' && u != '\\';
        return t;
    }();
    const bool plain = std::all_of(s.begin(), s.end(),
                                   [](char c) { return kPlain[static_cast<unsigned char>(c)]; });
    if (plain) {
        const std::size_t at = out_.size();
        out_.resize(at + s.size() + 2);  // one growth check, not three
        char* p = out_.data() + at;
        *p = '"';
        std::memcpy(p + 1, s.data(), s.size());
        p[s.size() + 1] = '"';
        return;
    }
    out_ += nlohmann::json(std::string(s)).dump(-1, ' ', false, on_bad_utf8_);
}

}  // namespace rackprof::gmon
