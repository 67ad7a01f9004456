// An export made whole: a stream of one chunk, made when first pulled (so opening a format
// checks its input without doing the work).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "gmon/export.h"

namespace rackprof::gmon {

inline ChunkStream single_chunk(std::function<std::string()> make) {
    return [make = std::move(make), done = false]() mutable -> std::optional<std::string> {
        if (done) return std::nullopt;
        done = true;
        return make();
    };
}

}  // namespace rackprof::gmon
