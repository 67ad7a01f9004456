// Lookups in a constant table of named entries (wire formats, export formats): an entry by
// its name, and the names listed as a message spells them ("a, b or c").
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace rackprof::protocol {

// The entry whose `name` is `name`; nullptr if none.
template <class T>
const T* find_named(std::span<const T> table, std::string_view name) {
    for (const auto& entry : table) {
        if (entry.name == name) return &entry;
    }
    return nullptr;
}

// Every entry's name in table order, each within `quote`, the last after `last_separator`.
template <class T>
std::string join_names(std::span<const T> table, std::string_view last_separator = " or ",
                       std::string_view quote = "") {
    std::string out;
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (i > 0) out += i + 1 == table.size() ? last_separator : std::string_view(", ");
        out.append(quote).append(table[i].name).append(quote);
    }
    return out;
}

}  // namespace rackprof::protocol
