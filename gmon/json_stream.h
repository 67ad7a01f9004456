// JSON written as it is produced, byte for byte what nlohmann::json's dump() prints for the same
// document (same indentation, escaping, number format), without building the document first:
// a report with 10^5 arcs as a DOM is millions of small allocations. Objects must be written
// with their keys in nlohmann's (sorted) order; the caller's tests compare with dump().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/large_buffer.h"

namespace rackprof::gmon {

class JsonStream {
  public:
    using ErrorHandler = nlohmann::json::error_handler_t;

    // indent < 0: compact, as dump(); else as dump(indent). `depth` is the nesting level of the
    // first value written (to continue a document dumped around it).
    explicit JsonStream(std::string& out, int indent = -1, int depth = 0,
                        ErrorHandler on_bad_utf8 = ErrorHandler::strict);

    JsonStream& begin_object();
    JsonStream& end_object();
    JsonStream& begin_array();
    JsonStream& end_array();
    JsonStream& key(std::string_view name);

    JsonStream& value(std::string_view s);
    JsonStream& value(const char* s) { return value(std::string_view(s)); }
    JsonStream& value(const std::string& s) { return value(std::string_view(s)); }
    JsonStream& value(double x);
    JsonStream& value(std::uint64_t n);
    JsonStream& value(std::int64_t n);
    JsonStream& value(std::uint32_t n) { return value(std::uint64_t{n}); }
    JsonStream& value(int n) { return value(std::int64_t{n}); }
    JsonStream& value(bool b);
    JsonStream& value(std::nullptr_t);
    // The text to append exactly one compact value to, in place (separators written): for hot
    // loops that write a fixed shape themselves. Numbers through append_number, strings quoted
    // as raw() says.
    std::string& value_text() {
        before_value();
        return out_;
    }
    // Numbers as value() writes them.
    static void append_number(std::string& out, double x);
    static void append_number(std::string& out, std::uint64_t n);
    // The same at `at`, which has room for kMaxNumberChars; returns the end.
    static constexpr std::size_t kMaxNumberChars = 32;
    static char* write_number(char* at, double x);
    static char* write_number(char* at, std::uint64_t n);
    // A value already written as compact JSON (a string quoted and escaped by this stream's
    // rules), placed as any value is.
    JsonStream& raw(std::string_view json) {
        before_value();
        out_ += json;
        return *this;
    }
    // A document built elsewhere, dumped in place at this depth.
    JsonStream& value(const nlohmann::json& document);

    // Room for `bytes` more, so a large document is not copied (and its pages faulted in)
    // again at each doubling of the string.
    int indent() const { return indent_; }
    ErrorHandler on_bad_utf8() const { return on_bad_utf8_; }
    void reserve(std::size_t bytes) { reserve_large(out_, bytes); }

    // key(name).value(v) in one call.
    template <class T>
    JsonStream& field(std::string_view name, const T& v) {
        return key(name).value(v);
    }

  private:
    void begin(char bracket);
    void end(char bracket);
    // Before a value: the separator and indentation it needs where it stands.
    void before_value();
    void newline_and_indent(std::size_t depth);
    void string(std::string_view s);

    std::string& out_;
    int indent_;
    ErrorHandler on_bad_utf8_;
    // Per open container: whether it has an element yet (bytes, not vector<bool>'s bits: every
    // value reads and writes the last one). Below them, `base_depth_` levels that were opened
    // by whoever dumps around this stream.
    std::vector<unsigned char> has_element_;
    std::size_t base_depth_;
    bool after_key_ = false;
};

}  // namespace rackprof::gmon
