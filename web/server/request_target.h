// The request target's parts as the API and the feeds read them: %XX escapes decoded, and the
// query's name=value pairs (application/x-www-form-urlencoded: '+' is a space).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace rackprof::web::server {

// "a%20b" -> "a b"; with `plus_is_space`, "a+b" -> "a b" too. Nothing for a bad escape ("%",
// "%4", "%zz").
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

// "/x?a=1&b&c=x%20y" -> {a: "1", b: "", c: "x y"}; names and values decoded. Nothing when an
// escape is bad or a name comes twice (which of two values was meant is not ours to guess);
// then `why`, when given, says which.
std::optional<std::map<std::string, std::string>> query_values(std::string_view target,
                                                               std::string* why = nullptr);

}  // namespace rackprof::web::server
