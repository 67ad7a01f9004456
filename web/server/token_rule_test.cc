#include "web/server/token_rule.h"

#include <doctest/doctest.h>

#include <string>

namespace rackprof::web::server {
namespace {

TEST_CASE("same_secret: equal bytes and equal lengths only, never an empty secret") {
    const std::string secret = "0123456789abcdef0123456789abcdef";
    CHECK(same_secret(secret, secret));
    CHECK(same_secret(std::string(secret), secret));   // equal contents, not the same buffer
    for (std::size_t i = 0; i < secret.size(); ++i) {  // one byte off anywhere, the last too
        std::string given = secret;
        given[i] = static_cast<char>(given[i] ^ 1);
        CAPTURE(i);
        CHECK_FALSE(same_secret(given, secret));
    }
    CHECK_FALSE(same_secret(secret.substr(0, secret.size() - 1), secret));  // a prefix
    CHECK_FALSE(same_secret(secret + "0", secret));                         // one byte more
    CHECK_FALSE(same_secret(secret + secret, secret));                      // the secret, repeated
    CHECK_FALSE(same_secret("", secret));
    CHECK_FALSE(same_secret("", ""));  // no token configured admits nobody
    CHECK_FALSE(same_secret("x", ""));
    CHECK(same_secret(std::string_view("a\0b", 3), std::string_view("a\0b", 3)));  // NULs count
    CHECK_FALSE(same_secret(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

}  // namespace
}  // namespace rackprof::web::server
