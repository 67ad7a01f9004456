#include "web/server/token_rule.h"

#include <openssl/crypto.h>

#include <cctype>

namespace rackprof::web::server {

bool TokenRule::needs_token(Access access) const {
    switch (access) {
        case Access::kPublic:
            return false;
        case Access::kRead:
            return require_token && token_for_reads;
        case Access::kWrite:
            return require_token;
    }
    return true;
}

bool TokenRule::admits(Access access, std::string_view authorization) const {
    return admits_token(access, bearer_credentials(authorization));
}

bool TokenRule::admits_token(Access access, std::string_view given) const {
    if (!needs_token(access)) return true;
    return !token.empty() && same_secret(given, token);
}

std::string_view bearer_credentials(std::string_view authorization) {
    constexpr std::string_view kScheme = "bearer";
    if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') return {};
    for (std::size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
    }
    const std::string_view rest = authorization.substr(kScheme.size());
    const auto start = rest.find_first_not_of(' ');
    return start == std::string_view::npos ? std::string_view() : rest.substr(start);
}

bool same_secret(std::string_view given, std::string_view secret) {
    // The length may leak (an attacker learns little from it); the bytes must not.
    if (secret.empty() || given.size() != secret.size()) return false;
    return CRYPTO_memcmp(given.data(), secret.data(), secret.size()) == 0;
}

}  // namespace rackprof::web::server
